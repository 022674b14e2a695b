"""API benchmark (issue "Verifications end to end", acceptance; run by ``make bench``).

(a) verifications per second through the API: ``POST /v1/verifications`` (a digest rubric, ``wait_ms=0``) over real
    HTTP to gunicorn on 127.0.0.1 (``manage.py runserver --noreload`` when gunicorn is not installed), run by k = 1,
    2 and 4 real Celery worker processes (prefork, one pool child each; ``BENCH_API_WORKERS``) on Redis, from the
    first request until every verification has its receipt; each k as a ratio to k times the 1-worker figure (issue
    15: >= 0.8 while the CPUs allow), with the CPU count, what the CPUs allow, and where the CPU went (the web
    server's and the workers' processes, the whole machine); beside the same work done in this process by calling
    ``verification_submit`` and then ``verification_run`` directly, one after the other. All the workers start at
    once and are warmed up; for each k, the first k consume the benchmark's queue and the others are told to stop
    consuming it (Celery's remote control: ``add_consumer``/``cancel_consumer``, checked with ``active_queues``), and
    the tasks each worker ran are read from its stats, so a figure for k is the work of exactly k processes.
(b) p50/p95 latency of one ``wait_ms=5000`` submission end to end (request sent until the 200 with the finished
    result is read), beside ``verification_submit`` + ``verification_run`` called directly.

Both sides run in the same run, in alternating rounds (the k in turn, the order reversed every other round), so the
machine's other load hits them alike. ``BENCH_API_CONN_MAX_AGE=<seconds>`` runs the server and the workers with
another database connection age than the portal's (an experiment; the portal keeps one for 60 s). PostgreSQL and
Redis only (DATABASE_URL=postgres://..., CELERY_BROKER_URL=redis://...): anything else is skipped with a message.
It works in a scratch database ``bench_api_<name>`` that it creates, migrates and drops, and in two Celery queues
of its own (``bench-api-<random>`` for the workers; ``...-direct-...`` takes the messages the direct submissions
publish, which nothing consumes), deleted from Redis at the end; every process it starts is killed at the end.
Prints figures; a benchmark, not a test: nothing here asserts a timing.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import math
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

REPO_ROOT = Path(__file__).resolve().parents[1]
THROUGHPUT_COUNT = int(os.environ.get("BENCH_API_COUNT", "400"))
LATENCY_COUNT = int(os.environ.get("BENCH_API_LATENCY", "200"))
#: (a): the numbers of Celery worker processes measured; (b) runs with 2 of them (or the most there are, if fewer).
WORKER_COUNTS = tuple(sorted({int(k) for k in os.environ.get("BENCH_API_WORKERS", "1,2,4").split(",")}))
CELERY_WORKERS = max(WORKER_COUNTS)
#: gunicorn's sync workers (a request each at a time) and the client threads of (a): as many web workers as Celery
#: workers at most and twice as many clients, so that the requests can keep ahead of the runs (the report says
#: whether they did: with 2 web workers the web side was the bottleneck at k = 2, end to end).
WEB_WORKERS = int(os.environ.get("BENCH_API_WEB_WORKERS", str(max(2, CELERY_WORKERS))))
CLIENTS = int(os.environ.get("BENCH_API_CLIENTS", str(2 * WEB_WORKERS)))
LATENCY_WORKERS = min(2, CELERY_WORKERS)
#: (a) in two ways: "end to end", the runs while the requests come in (the API's throughput: the web server and the
#: workers share the CPUs), timed from the first request; and "drain", the same submissions made through the API
#: first with no worker consuming, then the queue drained by the k workers, timed from their start (the workers alone).
MODES = ("end to end", "drain")
#: Submissions go round-robin to this many tasks: a new verification of a subject supersedes the latest one, so a
#: single task would serialize every submission behind the run of the one before it.
TASKS = int(os.environ.get("BENCH_API_TASKS", "16"))
ROUNDS = 2
WAIT_MS = 5000
WARM_UP = 10
START_SECONDS = 60
DRAIN_SECONDS = 300
NOTES = b"release-notes v1.2\n- fix: retry on timeout\n"
SETTINGS_MODULE = "bench_api_settings"
SETTINGS_TEXT = '''"""Settings of the API benchmark's processes: the portal's own, in the benchmark's Celery queue."""
import os

from reviewportal.settings import *  # noqa: F403

CELERY_TASK_DEFAULT_QUEUE = os.environ["BENCH_API_QUEUE"]
# The benchmark's one token sends thousands of submissions a minute: the throttle still runs on every request (its
# cost is measured), at a rate it never reaches (a 429 would be a submission that was never made).
REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"token": "1000000/minute"}}  # noqa: F405
if os.environ.get("BENCH_API_CONN_MAX_AGE"):  # an experiment: another connection age than the portal's (60 s)
    DATABASES["default"]["CONN_MAX_AGE"] = int(os.environ["BENCH_API_CONN_MAX_AGE"])  # noqa: F405
'''
#: What the started processes must not inherit from this one (they get the benchmark's own values).
_SCRUBBED = (
    "DATABASE_URL",
    "DJANGO_SETTINGS_MODULE",
    "REVIEWPORTAL_VAR_DIR",
    "REVIEWPORTAL_SIGNING_KEY",
    "REVIEWPORTAL_SIGNING_KEY_FILE",
    "REVIEWPORTAL_TESTING",
    "CELERY_RESULT_BACKEND",
    "SECRET_KEY",
    "BENCH_API_QUEUE",
)


def _skip_reason() -> str | None:
    if str(REPO_ROOT) not in sys.path:  # run as a file (bench_wait loads it by path): reach the bench package
        sys.path.insert(0, str(REPO_ROOT))
    from bench.bench_receipts import _postgres_skip_reason  # one answer to "is PostgreSQL here"

    skipped = _postgres_skip_reason(os.environ.get("DATABASE_URL", ""))
    if skipped is not None:
        return skipped
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if not broker.lower().startswith(("redis://", "rediss://")):
        return "needs Redis as the Celery broker (set CELERY_BROKER_URL=redis://127.0.0.1:6379/0)"
    try:
        import redis

        redis.Redis.from_url(broker, socket_connect_timeout=2, socket_timeout=2).ping()
    except Exception as exc:  # noqa: BLE001 - any failure means: no usable broker here
        return f"needs Redis: CELERY_BROKER_URL does not answer ({type(exc).__name__})"
    return None


# --- processes -------------------------------------------------------------------------------------------------------


class Processes:
    """The server and the workers; each in its own session, so its children die with it."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.started: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        with (self.logs / f"{name}.log").open("wb") as log:
            process = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
                argv,
                cwd=REPO_ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.started.append((name, process))

    def check(self) -> None:
        for name, process in self.started:
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with {process.returncode}:\n{self.tail(name)}")

    def tail(self, name: str, lines: int = 20) -> str:
        path = self.logs / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def stop(self) -> None:
        for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 30.0)):
            for _, process in self.started:
                if process.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, sig)
            deadline = time.monotonic() + grace
            for _, process in self.started:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=max(0.1, deadline - time.monotonic()))
            if all(process.poll() is not None for _, process in self.started):
                return


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _database_url(settings: dict[str, Any]) -> str:
    user = quote(str(settings.get("USER") or ""), safe="")
    password = quote(str(settings.get("PASSWORD") or ""), safe="")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host, port = settings.get("HOST") or "127.0.0.1", settings.get("PORT") or "5432"
    return f"postgres://{auth}{host}:{port}/{quote(str(settings['NAME']), safe='')}"


# --- HTTP ------------------------------------------------------------------------------------------------------------


class Client:
    """One HTTP/1.1 connection to the server (gunicorn's sync workers close it after each response; it reopens)."""

    def __init__(self, port: int, token: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode("utf-8")
        try:
            self.conn.request(method, path, body=data, headers=self.headers)
            response = self.conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            self.conn.close()  # the server closed a kept-alive connection first: once more, on a new one
            self.conn.request(method, path, body=data, headers=self.headers)
            response = self.conn.getresponse()
        payload = response.read()
        if response.getheader("Connection", "").lower() == "close":
            self.conn.close()
        return response.status, json.loads(payload) if payload else None

    def close(self) -> None:
        self.conn.close()


# --- the world -------------------------------------------------------------------------------------------------------


@dataclass
class World:
    agent: Any
    agent_token: Any
    agent_raw: str
    subjects: list[tuple[Any, dict[str, Any]]]  # (task, submission body)
    _turn: Iterator[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def next_subject(self) -> tuple[Any, dict[str, Any]]:
        with self._lock:
            return self.subjects[next(self._turn) % len(self.subjects)]


def _build_world() -> World:
    """``TASKS`` tasks, each with the same digest rubric as its accepted contract, claimed by an agent, and the
    evidence (the bytes the rubric's digest names) admitted for it by a collector."""
    from verification.actors.services.actors import actor_create, token_issue
    from verification.evidence.services import evidence_admit
    from verification.kernel.digests import sha256_digest
    from verification.runs.services.rubrics import rubric_register
    from verification.runs.services.tasks import claim_record, contract_accept, task_create

    owner = actor_create(name="bench-owner", kind="contract_owner")
    agent = actor_create(name="bench-agent", kind="agent")
    collector = actor_create(name="bench-collector", kind="collector")
    agent_token, agent_raw = token_issue(
        actor=agent, boundary="bench-agent-host", scopes=["verifications:write", "verifications:read"]
    )
    collector_token, _ = token_issue(actor=collector, boundary="bench-collector-host", scopes=["evidence:write"])
    criterion = {
        "id": "notes-digest",
        "kind": "digest",
        "observable": "evidence.content-digest",
        "expression": f'(= notes "{sha256_digest(NOTES)}")',
    }
    rubric = rubric_register(actor=owner, document={"name": "bench", "criteria": [criterion]})
    subjects = []
    for n in range(TASKS):
        task = task_create(actor=owner, title=f"bench: release notes {n}")
        contract_accept(actor=owner, task=task, rubric_hash=rubric.rubric_hash)
        claim_record(actor=agent, token=agent_token, task=task)
        notes = evidence_admit(actor=collector, token=collector_token, content=NOTES, task=task)
        subjects.append((task, {"task": str(task.pk), "evidence": [{"symbol": "notes", "evidence_id": str(notes.pk)}]}))
    return World(agent, agent_token, agent_raw, subjects)


# --- the two sides ---------------------------------------------------------------------------------------------------


def _direct(world: World, count: int) -> tuple[float, list[float], list[Any]]:
    """``verification_submit`` then ``verification_run``, ``count`` times in this process: (seconds, each, ids).

    The submission publishes its run to the broker on commit, as the API's does (to a queue nothing consumes)."""
    from verification.runs.services.run import verification_run
    from verification.runs.services.submit import verification_submit

    each: list[float] = []
    ids: list[Any] = []
    started = time.perf_counter()
    for _ in range(count):
        task, body = world.next_subject()
        t0 = time.perf_counter()
        verification, _ = verification_submit(
            actor=world.agent, token=world.agent_token, task=task, body={**body, "wait_ms": 0}, idempotency_key=None
        )
        verification_run(verification_id=verification.pk)
        each.append(time.perf_counter() - t0)
        ids.append(verification.pk)
    return time.perf_counter() - started, each, ids


def _finished(ids: list[str]) -> int:
    from verification.runs.models import Verification
    from verification.trust.models import Receipt

    done = Receipt.objects.filter(verification_id__in=ids, seq=0).count()
    return done + Verification.objects.filter(pk__in=ids, failed_at__isnull=False).count()


def _api_throughput(
    port: int, world: World, count: int, processes: Processes
) -> tuple[float, float, list[str], list[Any]]:
    """``count`` submissions with ``wait_ms=0`` from ``CLIENTS`` threads: (seconds from the first request until every
    one is finished (a receipt, or failed), seconds until the last response, ids, unexpected responses)."""
    started = time.perf_counter()
    answered, ids, unexpected = _submit(port, world, count)
    _drain(ids, processes)
    return time.perf_counter() - started, answered, ids, unexpected


def _submit(port: int, world: World, count: int) -> tuple[float, list[str], list[Any]]:
    """``count`` submissions with ``wait_ms=0`` from ``CLIENTS`` threads: (seconds until the last response, ids,
    unexpected responses)."""
    ids: list[str] = []
    unexpected: list[Any] = []
    lock = threading.Lock()
    shares = [count // CLIENTS + (1 if n < count % CLIENTS else 0) for n in range(CLIENTS)]

    def client(share: int) -> None:
        api = Client(port, world.agent_raw)
        try:
            for _ in range(share):
                _, body = world.next_subject()
                status, doc = api.request("POST", "/v1/verifications", {**body, "wait_ms": 0})
                with lock:
                    if status in (200, 202) and isinstance(doc, dict) and "id" in doc:
                        ids.append(doc["id"])
                    else:
                        unexpected.append((status, doc))
        finally:
            api.close()

    threads = [threading.Thread(target=client, args=(share,)) for share in shares if share]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started, ids, unexpected


def _drain(ids: list[str], processes: Processes) -> None:
    """Until every one of ``ids`` is finished (a receipt, or failed); polled every 20 ms."""
    deadline = time.monotonic() + DRAIN_SECONDS
    while _finished(ids) < len(ids):
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {_finished(ids)}/{len(ids)} verifications finished in {DRAIN_SECONDS} s")
        processes.check()
        time.sleep(0.02)


def _api_latency(port: int, world: World, count: int) -> tuple[list[float], list[str], list[Any]]:
    """``count`` submissions with ``wait_ms=5000``, one after the other: (each request's seconds, ids, unexpected)."""
    api = Client(port, world.agent_raw)
    each: list[float] = []
    ids: list[str] = []
    unexpected: list[Any] = []
    try:
        for _ in range(count):
            _, body = world.next_subject()
            t0 = time.perf_counter()
            status, doc = api.request("POST", "/v1/verifications", {**body, "wait_ms": WAIT_MS})
            each.append(time.perf_counter() - t0)
            if status == 200 and isinstance(doc, dict) and doc.get("status") == "succeeded":
                ids.append(doc["id"])
            else:
                unexpected.append((status, doc))
    finally:
        api.close()
    return each, ids, unexpected


# --- figures ---------------------------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass
class Phase:
    """The throughput runs with k workers, summed over the rounds."""

    seconds: float = 0.0  # first request until the last receipt
    answered_seconds: float = 0.0  # first request until the last response
    done: int = 0
    cpu: dict[str, float] = field(default_factory=dict)  # CpuClock.stop() summed
    tasks: dict[str, int] = field(default_factory=dict)  # tasks each worker received

    @property
    def rate(self) -> float:
        return self.done / self.seconds

    @property
    def machine_busy(self) -> float:
        """The share of the machine's CPU time that was busy (every process, other jobs included)."""
        return self.cpu["machine"] / self.cpu["machine-all"] if self.cpu.get("machine-all") else 0.0

    def add_cpu(self, cpu: dict[str, float], tasks: dict[str, int]) -> None:
        for key, value in cpu.items():
            self.cpu[key] = self.cpu.get(key, 0.0) + value
        for key, n in tasks.items():
            self.tasks[key] = self.tasks.get(key, 0) + n


@dataclass
class Figures:
    phases: dict[tuple[str, int], Phase] = field(
        default_factory=lambda: {(mode, k): Phase() for mode in MODES for k in WORKER_COUNTS}
    )
    api_ids: list[str] = field(default_factory=list)
    direct_seconds: float = 0.0
    direct_count: int = 0
    api_latency: list[float] = field(default_factory=list)
    direct_latency: list[float] = field(default_factory=list)
    latency_ids: list[str] = field(default_factory=list)
    unexpected: list[Any] = field(default_factory=list)
    load_at_start: tuple[float, float, float] = field(default_factory=os.getloadavg)


def _checks(ids: list[str]) -> str:
    """Every API verification met its contract with exactly one receipt (a benchmark of wrong answers is void)."""
    from verification.runs.models import Verification
    from verification.trust.models import Receipt

    met = Verification.objects.filter(pk__in=ids, determination="met").count()
    receipts = Receipt.objects.filter(verification_id__in=ids).count()
    seq0 = Receipt.objects.filter(verification_id__in=ids, seq=0).count()
    ok = met == receipts == seq0 == len(ids)
    verdict = "ok" if ok else "MISMATCH"
    return f"checks: {len(ids)} API verifications, {met} met, {seq0} with seq 0, {receipts} receipts in all: {verdict}"


def _table(rows: list[tuple[str, str, str, str, str]]) -> str:
    head = ("measure", "value", "comparison (same run)", "ratio", "target")
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(5)]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in (head, *rows)]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _phase_note(mode: str, k: int, phase: Phase, names: list[str]) -> str:
    """Where the time and the CPU of the runs with ``k`` workers went."""
    cpu, ms = phase.cpu, 1000 / phase.done
    workers = sum(cpu.get(name, 0.0) for name in names)
    machine = phase.machine_busy
    tasks = ", ".join(str(phase.tasks.get(name, 0)) for name in names)
    if mode == "drain":
        timing = (f"submitted in {phase.answered_seconds:.1f} s with no worker consuming, then drained in "
                  f"{phase.seconds:.1f} s")
    else:
        share = phase.answered_seconds / phase.seconds
        bound = (
            "the requests were all answered long before the runs finished: the workers are the bottleneck"
            if share < 0.7
            else "the requests took most of the time: the web side may be the bottleneck"
        )
        timing = f"the last answered after {phase.answered_seconds:.1f} of {phase.seconds:.1f} s ({bound})"
    return (
        f"{mode}, k={k}: {phase.done} submissions, {timing}; tasks per worker {tasks}; CPU per verification: "
        f"web server {cpu.get('web', 0.0) * ms:.1f} ms, workers {workers * ms:.1f} ms (PostgreSQL's not counted: its "
        f"backends are processes of its own); each consuming worker busy "
        f"{workers / (k * phase.seconds):.0%} of the time; the machine's CPUs {machine:.0%} busy (other jobs included)"
    )


def _cpu_bounds(one: Phase, within: list[str]) -> str | None:
    """Every process shares the CPUs: had the 1-worker phase kept a share B of them busy, k workers could reach at
    most 1 / B of its rate however well they scale, i.e. 1 / (k B) of k x the 1-worker figure."""
    busy = one.machine_busy
    if busy <= 0 or not within:
        return None
    return ", ".join(f"k = {k}: {min(1.0, 1 / (int(k) * busy)):.2f}" for k in within)


def _end_to_end_bound(one: Phase, within: list[str]) -> str:
    bounds = _cpu_bounds(one, within)
    if bounds is None:
        return ""
    return (
        f". End to end with 1 worker the machine's CPUs were already {one.machine_busy:.0%} busy (the web server, "
        f"PostgreSQL, Redis and the client threads beside the worker), so the CPUs bound the end-to-end ratio at "
        f"{bounds}"
    )


def _drain_bound(drained: Phase, within: list[str]) -> str:
    bounds = _cpu_bounds(drained, within)
    return "" if bounds is None else f"; so the CPUs bound the drain's ratio at {bounds}"


def _report(figures: Figures, server: str, names: list[str]) -> str:
    cpus = os.cpu_count() or 1
    one = figures.phases["end to end", 1]
    direct_rate = figures.direct_count / figures.direct_seconds
    labels = {"end to end": "(a) verifications/s via POST /v1/verifications, end to end,",
              "drain": "    the same submitted first, then the queue drained by"}
    rows = []
    for (mode, k), phase in figures.phases.items():
        base = figures.phases[mode, 1].rate
        rows.append(
            (
                f"{labels[mode]} {k} Celery worker{'s' if k > 1 else ''}",
                f"{phase.rate:,.1f}/s",
                f"{k} x the 1-worker figure: {k * base:,.1f}/s" if k > 1 else "",
                f"{phase.rate / (k * base):.2f}" if k > 1 else "",
                (">= 0.8" if k <= cpus else f"(k > {cpus} CPUs)") if k > 1 else "",
            )
        )
    rows.append(
        (
            "    verification_submit + verification_run called directly, one process",
            f"{direct_rate:,.1f}/s",
            f"1 worker via the API, end to end: {one.rate:,.1f}/s",
            f"{one.rate / direct_rate:.2f}",
            "",
        )
    )
    for q in (50, 95):
        api_ms = percentile(figures.api_latency, q) * 1000
        direct_ms = percentile(figures.direct_latency, q) * 1000
        rows.append(
            (
                f"(b) p{q} latency of a wait_ms={WAIT_MS} submission, {LATENCY_WORKERS} workers",
                f"{api_ms:,.1f} ms",
                f"verification_submit + verification_run: {direct_ms:,.1f} ms",
                f"{api_ms / direct_ms:.2f}",
                "",
            )
        )
    within = [str(k) for k in WORKER_COUNTS if 1 < k <= cpus]
    beyond = [k for k in WORKER_COUNTS if k > cpus]
    drained = figures.phases["drain", 1]
    worker_busy = sum(drained.cpu.get(name, 0.0) for name in names) / drained.seconds
    machine_busy = drained.machine_busy
    notes = [
        f"server: {server} on 127.0.0.1; up to {CELERY_WORKERS} workers `celery worker --pool=prefork "
        f"--concurrency=1` on Redis; PostgreSQL scratch database; os.cpu_count() = {cpus}, shared by all of them, "
        f"the client threads and the machine's other jobs; CONN_MAX_AGE "
        f"{os.environ.get('BENCH_API_CONN_MAX_AGE') or 'as the portal sets it (60 s by default)'}",
        f"what the CPUs allow: {cpus} CPUs, so up to k = {cpus} workers can each run on a CPU of their own (the web "
        "server, PostgreSQL, Redis and the client threads use the same CPUs); the target applies to k = "
        f"{', '.join(within) or '(none)'}"
        + "".join(f"; k = {k} workers share {cpus} CPUs: were one worker to keep a CPU busy, k = {k} could reach at "
                  f"most {cpus}/{k} = {cpus / k:.2f} of {k} x the 1-worker figure (shown, not a target)"
                  for k in beyond)
        + f". Measured while 1 worker drained the queue: the worker's processes used {worker_busy:.0%} of a CPU, "
        f"the machine's {cpus} CPUs were {machine_busy:.0%} busy (other jobs included)"
        + _drain_bound(drained, within)
        + _end_to_end_bound(one, within),
        f"(a) per k and round {THROUGHPUT_COUNT // ROUNDS} submissions (wait_ms=0) from {CLIENTS} client threads, "
        f"timed from the first request until the last receipt; {TASKS} tasks in turn; {ROUNDS} rounds, the k in "
        f"turn (reversed every other round), end to end and then drained for each; a direct run of "
        f"{THROUGHPUT_COUNT // ROUNDS} in a row first in each round",
        *(_phase_note(mode, k, phase, names) for (mode, k), phase in figures.phases.items()),
        f"(b) {len(figures.api_latency)} submissions one after the other, each timed from sending the request to "
        f"reading the 200; direct: {len(figures.direct_latency)}; no target is set for these figures",
        _checks(figures.api_ids + figures.latency_ids),
        f"load average at the start of the timed rounds {', '.join(f'{x:.2f}' for x in figures.load_at_start)}, at the "
        f"end {', '.join(f'{x:.2f}' for x in os.getloadavg())}",
    ]
    if figures.unexpected:
        notes.append(f"UNEXPECTED responses: {len(figures.unexpected)}, first: {str(figures.unexpected[0])[:300]}")
    return _table(rows) + "\n" + "\n".join(notes)


# --- set-up and tear-down --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _scratch_database() -> Iterator[Any]:
    from django.db import connection

    base_name = connection.settings_dict["NAME"]
    connection.settings_dict.setdefault("TEST", {})["NAME"] = f"bench_api_{base_name}"
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False, serialize=False)
    try:
        yield connection
    finally:
        connection.close()
        for attempt in range(20):  # the killed processes' sessions may take a moment to go
            try:
                connection.creation.destroy_test_db(old_name, verbosity=0, keepdb=False)
                break
            except Exception:
                if attempt == 19:
                    raise
                time.sleep(0.5)


def _forget_queues(broker: str, token: str) -> None:
    """Delete the benchmark's queues and their bindings from Redis (only keys that carry this run's token)."""
    import redis

    client = redis.Redis.from_url(broker)
    try:
        for key in list(client.scan_iter(match=f"*{token}*", count=1000)):
            client.delete(key)
        for key in list(client.scan_iter(match="_kombu.binding.*", count=1000)):  # kombu's exchange bindings
            if client.type(key) == b"set":
                ours = [m for m in client.smembers(key) if token.encode() in m]
                if ours:
                    client.srem(key, *ours)
    finally:
        client.close()


def _wait_until(condition: Callable[[], bool], seconds: float, processes: Processes) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        processes.check()
        if time.monotonic() > deadline:
            raise RuntimeError(f"not ready after {seconds} s")
        time.sleep(0.2)


def _workers_answer(names: list[str]) -> bool:
    """Every one of our workers answers a ping (remote control; only ours are asked)."""
    from reviewportal.celery import app

    replies = app.control.ping(destination=names, timeout=1.0)
    return {name for reply in replies for name in reply} >= set(names)


def _consuming(queue: str, names: list[str]) -> set[str]:
    """Which of the workers ``names`` consume ``queue`` now (each must answer)."""
    from reviewportal.celery import app

    replies = app.control.inspect(destination=names, timeout=5.0).active_queues() or {}
    if set(replies) != set(names):
        raise RuntimeError(f"workers that did not answer: {sorted(set(names) - set(replies))}")
    return {name for name, queues in replies.items() if any(q.get("name") == queue for q in queues)}


def _consume(queue: str, active: list[str], idle: list[str]) -> None:
    """The ``active`` workers consume ``queue`` and the ``idle`` ones do not (remote control), checked. Only a change
    is sent: a worker runs ``add_consumer`` after it has replied (``call_soon``), so an add to a worker that already
    consumes could land after a later cancel; the adds are awaited until ``active_queues`` shows them."""
    from reviewportal.celery import app

    now = _consuming(queue, active + idle)
    stop, start = sorted(now & set(idle)), sorted(set(active) - now)
    if stop:
        app.control.cancel_consumer(queue, destination=stop, reply=True, timeout=5.0)
    if start:
        app.control.add_consumer(queue, destination=start, reply=True, timeout=5.0)
    deadline = time.monotonic() + 10
    while (now := _consuming(queue, active + idle)) != set(active):
        if time.monotonic() > deadline:
            raise RuntimeError(f"workers consuming {queue}: {sorted(now)}, expected {sorted(active)}")
        time.sleep(0.005)


def _tasks_run(names: list[str]) -> dict[str, int]:
    """How many tasks each worker has received so far (its stats' ``total``, every task name)."""
    from reviewportal.celery import app

    replies = app.control.inspect(destination=names, timeout=5.0).stats() or {}
    return {name: sum(replies.get(name, {}).get("total", {}).values()) for name in names}


# --- CPU -------------------------------------------------------------------------------------------------------------

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _session_cpu(session: int) -> float:
    """CPU seconds (user + system, and of waited-for children) of the live processes of ``session`` (a process
    started with ``start_new_session`` and everything it forked: gunicorn's workers, Celery's pool child)."""
    ticks = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()  # from field 3 (state) on: session is field 6, utime 14
        if int(fields[3]) == session:
            ticks += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / _TICKS


def _machine_cpu() -> tuple[float, float]:
    """(busy, all) CPU seconds of the whole machine since boot (``/proc/stat``; busy: neither idle nor iowait)."""
    fields = [int(f) for f in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / _TICKS, sum(fields) / _TICKS


@dataclass
class CpuClock:
    """CPU seconds of the web server, of each worker, and the machine's, between ``start`` and ``stop``."""

    web: int  # the server's pid (its session)
    workers: dict[str, int]  # worker name -> pid (its session)
    readings: dict[str, float] = field(default_factory=dict)

    def _read(self) -> dict[str, float]:
        busy, every = _machine_cpu()
        out = {"web": _session_cpu(self.web), "machine": busy, "machine-all": every}
        out.update({name: _session_cpu(pid) for name, pid in self.workers.items()})
        return out

    def start(self) -> None:
        self.readings = self._read()

    def stop(self) -> dict[str, float]:
        now = self._read()
        return {key: now[key] - self.readings[key] for key in now}


def _healthy(port: int) -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        conn.request("GET", "/healthz")
        status = conn.getresponse().status
        conn.close()
    except OSError:
        return False
    return status == 200


def _server_argv(port: int) -> tuple[list[str], str]:
    try:
        import gunicorn  # noqa: F401
    except ImportError:
        argv = [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload", "--nothreading"]
        return argv, "manage.py runserver --noreload (gunicorn not installed)"
    argv = [
        sys.executable, "-m", "gunicorn", "reviewportal.wsgi:application",
        "--bind", f"127.0.0.1:{port}", "--workers", str(WEB_WORKERS), "--log-level", "warning",
    ]
    return argv, f"gunicorn, {WEB_WORKERS} sync workers"


def main() -> str | None:
    skipped = _skip_reason()
    if skipped is not None:
        return f"bench_api: skipped: {skipped}"
    if 1 not in WORKER_COUNTS:
        return f"bench_api: BENCH_API_WORKERS must include 1 (the figure the others are compared with): {WORKER_COUNTS}"
    broker = os.environ["CELERY_BROKER_URL"]
    token = secrets.token_hex(6)
    api_queue, direct_queue = f"bench-api-{token}", f"bench-api-direct-{token}"
    with tempfile.TemporaryDirectory(prefix="bench-api-") as tmp:
        root = Path(tmp)
        (root / f"{SETTINGS_MODULE}.py").write_text(SETTINGS_TEXT, encoding="utf-8")
        (root / "logs").mkdir()
        var = root / "var"
        secret_key = secrets.token_urlsafe(50)
        for name in ("REVIEWPORTAL_SIGNING_KEY", "REVIEWPORTAL_SIGNING_KEY_FILE", "REVIEWPORTAL_TESTING"):
            os.environ.pop(name, None)
        os.environ.update(
            {
                "DJANGO_SETTINGS_MODULE": SETTINGS_MODULE,
                "REVIEWPORTAL_VAR_DIR": str(var),
                "SECRET_KEY": secret_key,
                "BENCH_API_QUEUE": direct_queue,  # this process's own submissions: published, never consumed
            }
        )
        sys.path.insert(0, str(root))
        import django

        try:
            django.setup()
        finally:
            os.environ.pop("SECRET_KEY", None)
        processes = Processes(root / "logs")
        try:
            with _scratch_database() as connection:
                try:
                    return _run(root, var, broker, api_queue, token, secret_key, connection, processes)
                finally:
                    processes.stop()  # before the database is dropped: their sessions must go first
        finally:
            _forget_queues(broker, token)


def _run(  # noqa: PLR0913 - the run's whole context, passed once
    root: Path, var: Path, broker: str, queue: str, token: str, secret_key: str, connection: Any, processes: Processes
) -> str:
    from verification.trust.services.keys import signing_key_create

    signing_key_create()
    world = _build_world()
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": SETTINGS_MODULE,
            "PYTHONPATH": os.pathsep.join([str(root), str(REPO_ROOT)]),
            "DATABASE_URL": _database_url(connection.settings_dict),
            "CELERY_BROKER_URL": broker,
            "REVIEWPORTAL_VAR_DIR": str(var),
            "SECRET_KEY": secret_key,
            "BENCH_API_QUEUE": queue,
            "PYTHONUNBUFFERED": "1",
        }
    )
    port = _free_port()
    server_argv, server = _server_argv(port)
    processes.start("web", server_argv, env)
    names = [f"bench-api-{token}-{n}@{socket.gethostname()}" for n in range(CELERY_WORKERS)]
    for n, name in enumerate(names):
        processes.start(
            f"worker{n}",
            [
                sys.executable, "-m", "celery", "-A", "reviewportal", "worker", "-Q", queue,
                "--pool=prefork", "--concurrency=1", "--loglevel=WARNING",
                "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", name,
            ],
            env,
        )
    _wait_until(lambda: _healthy(port), START_SECONDS, processes)
    _wait_until(lambda: _workers_answer(names), START_SECONDS, processes)
    # Warm up both sides (imports, connections, the private key cache) and every worker: a burst they share.
    _, _, warm_unexpected = _api_latency(port, world, WARM_UP)
    if warm_unexpected:
        raise RuntimeError(f"warm-up failed: {str(warm_unexpected[0])[:300]}\n{processes.tail('web')}")
    *_, warm_unexpected = _api_throughput(port, world, WARM_UP * CELERY_WORKERS, processes)
    if warm_unexpected:
        raise RuntimeError(f"warm-up failed: {str(warm_unexpected[0])[:300]}\n{processes.tail('web')}")
    _direct(world, WARM_UP)

    pids = dict(processes.started)
    clock = CpuClock(pids["web"].pid, {name: pids[f"worker{n}"].pid for n, name in enumerate(names)})
    figures = Figures()
    per_phase = THROUGHPUT_COUNT // ROUNDS
    for round_no in range(ROUNDS):
        seconds, each, _ = _direct(world, per_phase)
        figures.direct_seconds += seconds
        figures.direct_count += len(each)
        for k in WORKER_COUNTS if round_no % 2 == 0 else tuple(reversed(WORKER_COUNTS)):
            for mode in MODES:
                tasks_before = _tasks_run(names)
                if mode == "end to end":
                    _consume(queue, names[:k], names[k:])
                    clock.start()
                    seconds, answered, ids, unexpected = _api_throughput(port, world, per_phase, processes)
                else:
                    _consume(queue, [], names)
                    answered, ids, unexpected = _submit(port, world, per_phase)
                    clock.start()
                    started = time.perf_counter()
                    _consume(queue, names[:k], names[k:])
                    _drain(ids, processes)
                    seconds = time.perf_counter() - started
                cpu = clock.stop()
                tasks_after = _tasks_run(names)
                phase = figures.phases[mode, k]
                phase.seconds += seconds
                phase.answered_seconds += answered
                phase.done += len(ids)
                phase.add_cpu(cpu, {name: tasks_after[name] - tasks_before[name] for name in names})
                figures.api_ids += ids
                figures.unexpected += unexpected
    _consume(queue, names[:LATENCY_WORKERS], names[LATENCY_WORKERS:])
    for _ in range(ROUNDS):
        each, ids, unexpected = _api_latency(port, world, LATENCY_COUNT // ROUNDS)
        figures.api_latency += each
        figures.latency_ids += ids
        figures.unexpected += unexpected
        _, each, _ = _direct(world, LATENCY_COUNT // ROUNDS)
        figures.direct_latency += each
    processes.check()
    return _report(figures, server, names)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO_ROOT))
    print(main())
