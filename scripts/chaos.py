#!/usr/bin/env python
"""Fault injection: nothing acknowledged is ever lost (issue 16). ``make chaos`` runs it in full (1,000 submissions
per fault); tests/verification/test_chaos.py runs it bounded (100 per fault) in .ci/run's services pass.

It starts its OWN PostgreSQL (``initdb`` into a temporary folder, another port; as the ``postgres`` user when run as
root) and its OWN ``redis-server`` (another port, no persistence: the harsher case, every queued message is lost on
a restart), never the shared services; then the production topology against them: gunicorn with 2 workers, 2 Celery
workers (prefork, one pool child each) and Celery beat (the sweeper). For each fault — none, PostgreSQL stopped
(immediate) and started 5 s later, Redis shut down and started 5 s later, SIGKILL of a Celery worker's MAIN process
restarted 5 s later — 4 client threads send ``POST /v1/verifications`` with an ``Idempotency-Key`` each, retrying a
5xx or a dropped connection with the same key (waiting ``Retry-After``); the fault is injected after ~30 % of the
submissions were acknowledged, and each row says what was in flight around it (acknowledged, client threads still
sending, requests sent while the fault lasted, acknowledged verifications without a run yet) so that a caller can
check the fault struck mid-load. Then it waits for the system to settle and counts, over the acknowledged ones: run
exactly once (one seq-0 receipt), stuck (no receipt, not failed), failed, duplicates (a second run receipt or a
second verification for one key), and the client's responses with 500 and 503 (with and without ``Retry-After``).

Exit 0 only when every acknowledged verification ran exactly once, none is stuck, none duplicated and no response
was a 500. Timing knobs are turned down so a run takes minutes (printed with the table); the mechanisms are the
production ones. Every process it started is killed and every folder removed at the end, whatever happens.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
FAULTS = ("none", "postgres", "redis", "worker")
CLIENTS = 4
FAULT_AT = 0.3
OUTAGE_SECONDS = 5
TASKS = 16
#: Knobs of the started processes (the production defaults are minutes; the mechanisms are the same).
TUNING = {
    "REVIEWPORTAL_RUN_RETRY_BASE_SECONDS": "10",  # retries after 5-10 s, then 10-20 s: past an 8 s outage
    "REVIEWPORTAL_RUN_TIME_LIMIT_SECONDS": "30",
    "REVIEWPORTAL_BROKER_VISIBILITY_TIMEOUT_SECONDS": "60",
    "REVIEWPORTAL_SWEEP_INTERVAL_SECONDS": "5",
    "REVIEWPORTAL_SWEEP_AFTER_SECONDS": "30",
    "REVIEWPORTAL_STUCK_AFTER_SECONDS": "90",
    "REVIEWPORTAL_RETRY_AFTER_SECONDS": "2",
    "REVIEWPORTAL_DB_CONNECT_TIMEOUT_SECONDS": "3",
}
NOTES = b"release-notes v1.2\n- fix: retry on timeout\n"
WORLD_SCRIPT = r"""
import json, django
django.setup()
from verification.kernel.digests import sha256_digest
from verification.actors.services.actors import actor_create, token_issue
from verification.evidence.services import evidence_admit
from verification.runs.services.rubrics import rubric_register
from verification.runs.services.tasks import claim_record, contract_accept, task_create
notes = __NOTES__
owner = actor_create(name="chaos-owner", kind="contract_owner")
agent = actor_create(name="chaos-agent", kind="agent")
collector = actor_create(name="chaos-collector", kind="collector")
agent_token, raw = token_issue(
    actor=agent, boundary="chaos-agent-host", scopes=["verifications:write", "verifications:read"]
)
collector_token, _ = token_issue(actor=collector, boundary="chaos-collector-host", scopes=["evidence:write"])
criterion = {"id": "notes-digest", "kind": "digest", "observable": "evidence.content-digest",
             "expression": f'(= notes "{sha256_digest(notes)}")'}
rubric = rubric_register(actor=owner, document={"name": "chaos", "criteria": [criterion]})
bodies = []
for n in range(__TASKS__):
    task = task_create(actor=owner, title=f"chaos {n}")
    contract_accept(actor=owner, task=task, rubric_hash=rubric.rubric_hash)
    claim_record(actor=agent, token=agent_token, task=task)
    item = evidence_admit(actor=collector, token=collector_token, content=notes, task=task)
    bodies.append({"task": str(task.pk), "evidence": [{"symbol": "notes", "evidence_id": str(item.pk)}], "wait_ms": 0})
print("WORLD " + json.dumps({"token": raw, "bodies": bodies}))
""".replace("__NOTES__", repr(NOTES)).replace("__TASKS__", str(TASKS))


def say(text: str) -> None:
    print(f"chaos: {text}", flush=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# --- the private PostgreSQL and Redis -----------------------------------------------------------------------------


class Postgres:
    """A PostgreSQL cluster of our own in a temporary folder (as the postgres user when we are root)."""

    def __init__(self) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
        initdb = found[-1] if found else shutil.which("initdb")
        if not initdb:
            raise SystemExit("chaos: initdb not found (install PostgreSQL server binaries)")
        self.bin = Path(initdb).parent
        self.port = free_port()
        self.data = Path(tempfile.mkdtemp(prefix="chaos-pg-"))
        if os.geteuid() == 0:
            shutil.chown(self.data, "postgres", "postgres")

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = list(argv)
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=check, stdin=subprocess.DEVNULL)

    def init(self) -> None:
        self._run(str(self.bin / "initdb"), "-D", str(self.data / "db"), "-U", "postgres", "-A", "trust",
                  "-E", "UTF8", "--no-sync")

    def start(self) -> None:
        options = (f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c full_page_writes=off -c max_connections=200")
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data / "db"), "-l", str(self.data / "log"), "-w",
                  "-t", "60", "-o", options, "start")

    def stop(self, mode: str = "immediate") -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data / "db"), "-m", mode, "-w", "stop", check=False)

    def url(self, name: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.data, ignore_errors=True)


class Redis:
    def __init__(self, root: Path) -> None:
        self.port = free_port()
        self.dir = root / "redis"
        self.dir.mkdir()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = (self.dir / "redis.log").open("ab")
        self.process = subprocess.Popen(  # noqa: S603 - fixed arguments
            [  # noqa: S607 - the system's redis-server, from PATH
                "redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", str(self.dir), "--daemonize", "no",
            ],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        log_text = (self.dir / "redis.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"redis-server did not start on port {self.port}:\n{log_text}")

    def shutdown(self) -> None:
        argv = ["redis-cli", "-p", str(self.port), "shutdown", "nosave"]
        subprocess.run(argv, capture_output=True, check=False)  # noqa: S607 - the system's redis-cli, from PATH
        if self.process is not None:
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


# --- the portal's processes ----------------------------------------------------------------------------------------


class Processes:
    def __init__(self, logs: Path, env: dict[str, str]) -> None:
        self.logs, self.env = logs, env
        self.running: dict[str, subprocess.Popen[bytes]] = {}
        self.groups: list[int] = []  # every process group we made (a killed worker's orphaned pool child stays in it)

    def start(self, name: str, argv: list[str]) -> None:
        with (self.logs / f"{name}.log").open("ab") as log:
            process = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
                argv, cwd=REPO_ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.running[name] = process
        self.groups.append(process.pid)

    def worker(self, n: int) -> None:
        self.start(f"worker{n}", [
            sys.executable, "-m", "celery", "-A", "reviewportal", "worker", "--pool=prefork", "--concurrency=1",
            "--loglevel=WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat",
            "-n", f"chaos-{n}-{secrets.token_hex(3)}@%h",
        ])

    def tail(self, name: str, lines: int = 15) -> str:
        path = self.logs / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def stop(self) -> None:
        for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
            for group in self.groups:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(group, sig)
            deadline = time.monotonic() + grace
            for process in self.running.values():
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=max(0.1, deadline - time.monotonic()))
            if all(p.poll() is not None for p in self.running.values()):
                break
        for group in self.groups:  # orphans of a killed main process
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)


# --- the client ---------------------------------------------------------------------------------------------------


@dataclass
class Tally:
    acknowledged: dict[str, str] = field(default_factory=dict)  # idempotency key -> verification id
    not_acknowledged: int = 0
    http_500: int = 0
    http_503: int = 0
    http_503_without_retry_after: int = 0
    other_5xx: int = 0
    dropped: int = 0
    requests: int = 0  # every attempt sent, answered or not
    unexpected: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def submit(port: int, token: str, key: str, body: dict[str, Any], tally: Tally, deadline_s: float) -> None:
    data = json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json", "Idempotency-Key": key}
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        with tally.lock:
            tally.requests += 1
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            conn.request("POST", "/v1/verifications", body=data, headers=headers)
            response = conn.getresponse()
            payload = response.read()
            retry_after = response.getheader("Retry-After")
            conn.close()
        except (OSError, http.client.HTTPException):
            with tally.lock:
                tally.dropped += 1
            time.sleep(0.5)
            continue
        status = response.status
        if status in (200, 202):
            with tally.lock:
                tally.acknowledged[key] = json.loads(payload)["id"]
            return
        with tally.lock:
            if status == 500:
                tally.http_500 += 1
            elif status == 503:
                tally.http_503 += 1
                tally.http_503_without_retry_after += retry_after is None
            elif status >= 500:
                tally.other_5xx += 1
            else:
                tally.unexpected.append(f"{status} {payload[:200]!r}")
                return
        time.sleep(min(float(retry_after or 1), 5.0))
    with tally.lock:
        tally.not_acknowledged += 1


# --- one phase ----------------------------------------------------------------------------------------------------


@dataclass
class Context:
    port: int
    token: str
    bodies: list[dict[str, Any]]
    pg: Postgres
    redis: Redis
    processes: Processes
    db_url: str


def inject(fault: str, ctx: Context) -> str:
    if fault == "postgres":
        ctx.pg.stop("immediate")
        time.sleep(OUTAGE_SECONDS)
        ctx.pg.start()
        return "PostgreSQL stopped (immediate), started 5 s later"
    if fault == "redis":
        ctx.redis.shutdown()
        time.sleep(OUTAGE_SECONDS)
        ctx.redis.start()
        return "Redis shut down (no persistence), started 5 s later"
    if fault == "worker":
        victim = ctx.processes.running["worker0"]
        os.kill(victim.pid, signal.SIGKILL)  # the main process only; its pool child is orphaned
        time.sleep(OUTAGE_SECONDS)
        ctx.processes.worker(0)
        return "SIGKILL of worker0's main process, a new worker0 5 s later"
    return "no fault"


def query(url: str, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, connect_timeout=5) as conn:
        return list(conn.execute(sql, params).fetchall())


def counts(ctx: Context, ids: list[str]) -> dict[str, int]:
    seq0 = dict(query(ctx.db_url, "SELECT verification_id::text, count(*) FROM verification_receipt WHERE seq = 0 "
                      "AND verification_id = ANY(%s::uuid[]) GROUP BY verification_id", (ids,)))
    runs = query(ctx.db_url, "SELECT verification_id FROM verification_receipt WHERE kind = 'run' AND "
                 "verification_id = ANY(%s::uuid[]) GROUP BY verification_id HAVING count(*) > 1", (ids,))
    failed = {r[0] for r in query(ctx.db_url, "SELECT id::text FROM verification_verification WHERE "
                                  "failed_at IS NOT NULL AND id = ANY(%s::uuid[])", (ids,))}
    return {
        "exactly_once": sum(1 for i in ids if seq0.get(i) == 1),
        "stuck": sum(1 for i in ids if i not in seq0 and i not in failed),
        "failed": len(failed),
        "duplicates": sum(1 for i in ids if seq0.get(i, 0) > 1) + len(runs),
    }


def phase(fault: str, count: int, ctx: Context, settle_s: float) -> dict[str, Any]:
    tally = Tally()
    prefix = f"{fault}-{secrets.token_hex(4)}"
    keys = [f"{prefix}-{i}" for i in range(count)]
    turn = iter(range(count))
    turn_lock = threading.Lock()

    def client() -> None:
        while True:
            with turn_lock:
                i = next(turn, None)
            if i is None:
                return
            submit(ctx.port, ctx.token, keys[i], ctx.bodies[i % len(ctx.bodies)], tally, deadline_s=180)

    injected: list[str] = []
    around: dict[str, int] = {}  # what was in flight when the fault began and while it lasted

    def faulter() -> None:
        while len(tally.acknowledged) < count * FAULT_AT and any(t.is_alive() for t in threads):
            time.sleep(0.05)
        with tally.lock:
            acked, requests = list(tally.acknowledged.values()), tally.requests
        around["clients_sending_at_fault"] = sum(t.is_alive() for t in threads)
        around["acknowledged_at_fault"] = len(acked)
        around["unrun_at_fault"] = -1  # unknown unless the query answers
        with contextlib.suppress(Exception):
            around["unrun_at_fault"] = len(acked) - counts(ctx, acked)["exactly_once"]
        injected.append(inject(fault, ctx))
        with tally.lock:
            around["requests_during_fault"] = tally.requests - requests
            around["acknowledged_after_fault"] = len(tally.acknowledged)

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    fault_thread = threading.Thread(target=faulter)
    fault_thread.start()
    for thread in threads:
        thread.join()
    fault_thread.join()
    answered = time.monotonic() - started
    ids = list(tally.acknowledged.values())
    deadline = time.monotonic() + settle_s
    result: dict[str, int] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            result = counts(ctx, ids)
            if result["stuck"] == 0:
                break
        time.sleep(2)
    result = counts(ctx, ids)
    key_dupes = query(ctx.db_url, "SELECT count(*) FROM (SELECT idempotency_key FROM verification_verification "
                      "WHERE idempotency_key LIKE %s GROUP BY idempotency_key HAVING count(*) > 1) d", (prefix + "-%",))
    result["duplicates"] += int(key_dupes[0][0])
    return {
        "fault": fault,
        "injected": injected[0] if injected else "",
        **around,
        "submitted": count,
        "acknowledged": len(ids),
        "not_acknowledged": tally.not_acknowledged,
        **result,
        "http_500": tally.http_500,
        "http_503": tally.http_503,
        "http_503_without_retry_after": tally.http_503_without_retry_after,
        "other_5xx": tally.other_5xx,
        "dropped_connections": tally.dropped,
        "unexpected": len(tally.unexpected),
        "first_unexpected": tally.unexpected[0] if tally.unexpected else "",
        "answered_s": round(answered, 1),
        "settled_s": round(time.monotonic() - started - answered, 1),
    }


def ok(row: dict[str, Any]) -> bool:
    return (
        row["acknowledged"] == row["submitted"]
        and row["exactly_once"] == row["acknowledged"]
        and row["stuck"] == 0
        and row["duplicates"] == 0
        and row["http_500"] == 0
        and row["http_503_without_retry_after"] == 0
        and row["unexpected"] == 0
    )


def table(rows: list[dict[str, Any]]) -> str:
    head = ("fault", "acknowledged", "exactly once", "stuck", "failed", "duplicates", "500", "503 (Retry-After)",
            "answered/settled s")
    lines = [head]
    for r in rows:
        lines.append((r["fault"], f"{r['acknowledged']}/{r['submitted']}", str(r["exactly_once"]), str(r["stuck"]),
                      str(r["failed"]), str(r["duplicates"]), str(r["http_500"]),
                      f"{r['http_503']} ({r['http_503'] - r['http_503_without_retry_after']})",
                      f"{r['answered_s']}/{r['settled_s']}"))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = ["| " + " | ".join(c.ljust(widths[i]) for i, c in enumerate(line)) + " |" for line in lines]
    out.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)


# --- main ---------------------------------------------------------------------------------------------------------


def wait_until(check: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if check():
                return
        time.sleep(0.3)
    raise RuntimeError(f"{what}: not ready after {seconds} s")


def healthy(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3)
    conn.request("GET", "/healthz")
    status = conn.getresponse().status
    conn.close()
    return status == 200


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-fault", type=int, default=1000)
    parser.add_argument("--faults", default=",".join(FAULTS))
    parser.add_argument("--settle-seconds", type=float, default=240)
    parser.add_argument("--json", action="store_true", help="also print the rows as one JSON line")
    args = parser.parse_args(argv)
    faults = [f for f in args.faults.split(",") if f]
    if not set(faults) <= set(FAULTS):
        parser.error(f"--faults: choose from {', '.join(FAULTS)}")
    root = Path(tempfile.mkdtemp(prefix="chaos-"))
    (root / "logs").mkdir()
    pg = Postgres()
    redis = Redis(root)
    processes: Processes | None = None
    try:
        say(f"private PostgreSQL on port {pg.port}, Redis on port {redis.port}, files in {root}")
        pg.init()
        pg.start()
        redis.start()
        import psycopg

        with psycopg.connect(pg.url("postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE chaos")
        scrub = ("DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "DJANGO_SETTINGS_MODULE", "SECRET_KEY")
        env = {k: v for k, v in os.environ.items() if k not in scrub and not k.startswith("REVIEWPORTAL_")}
        env.update(TUNING)
        env.update({
            "DJANGO_SETTINGS_MODULE": "reviewportal.settings",
            "DATABASE_URL": pg.url("chaos"),
            "CELERY_BROKER_URL": redis.url(),
            "REVIEWPORTAL_VAR_DIR": str(root / "var"),
            "SECRET_KEY": secrets.token_urlsafe(50),
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": str(REPO_ROOT),
        })
        for step in (["manage.py", "migrate", "--noinput"], ["manage.py", "create_signing_key"]):
            done = subprocess.run([sys.executable, *step], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                                  check=False, stdin=subprocess.DEVNULL)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(step)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        made = subprocess.run([sys.executable, "-c", WORLD_SCRIPT], cwd=REPO_ROOT, env=env, capture_output=True,
                              text=True, check=False, stdin=subprocess.DEVNULL)
        line = next((x for x in made.stdout.splitlines() if x.startswith("WORLD ")), None)
        if line is None:
            raise RuntimeError(f"building the world failed:\n{made.stderr[-3000:]}")
        world = json.loads(line[len("WORLD "):])
        port = free_port()
        processes = Processes(root / "logs", env)
        processes.start("web", [sys.executable, "-m", "gunicorn", "reviewportal.wsgi:application", "--bind",
                                f"127.0.0.1:{port}", "--workers", "2", "--timeout", "60", "--log-level", "warning"])
        processes.worker(0)
        processes.worker(1)
        processes.start("beat", [sys.executable, "-m", "celery", "-A", "reviewportal", "beat", "--loglevel=WARNING",
                                 "-s", str(root / "beat-schedule")])
        wait_until(lambda: healthy(port), 90, "gunicorn")
        ctx = Context(port, world["token"], world["bodies"], pg, redis, processes, pg.url("chaos"))
        say(f"tuning: {' '.join(f'{k}={v}' for k, v in TUNING.items())}")
        rows = []
        for fault in faults:
            say(f"fault {fault}: {args.per_fault} submissions from {CLIENTS} clients")
            row = phase(fault, args.per_fault, ctx, args.settle_seconds)
            say(f"  {row['injected']}; {json.dumps(row)}")
            rows.append(row)
        print(table(rows), flush=True)
        if args.json:
            print("CHAOS " + json.dumps(rows), flush=True)
        bad = [r["fault"] for r in rows if not ok(r)]
        if bad:
            say(f"FAILED for: {', '.join(bad)}")
            for name in ("web", "worker0", "worker1", "beat"):
                say(f"--- {name}\n{processes.tail(name)}")
            return 1
        say("every acknowledged verification ran exactly once; none stuck, none duplicated, no 500")
        return 0
    finally:
        if processes is not None:
            processes.stop()
        redis.shutdown()
        pg.remove()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
