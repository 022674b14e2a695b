"""Bounded-wait benchmark (issue 15; run by ``make bench``): how soon a ``wait_ms`` submission answers after its run
commits, now that the waiting request is woken by the run's announcement
(``verification/runs/run_signal.py``) instead of
reading the database at intervals.

``POST /v1/verifications`` with ``wait_ms=5000`` over real HTTP to gunicorn, one request after the other, each run by
one real Celery worker (prefork, one pool child) on Redis: for each, the answer's arrival (wall clock, this machine)
minus the time of the run's announcement, which the worker makes when the commit has returned and which carries that
time (``run_signal.announce``; this process hears every announcement on a subscription of its own): the delay after
the commit. Also, as before, minus the ``verification.finished`` event's ``created_at`` — the run transaction's last
write, taken just before its commit, so that figure includes the commit itself (its WAL flush: 2-4 ms on this
machine's disk). Beside it, in alternating rounds, the same work done directly in this process
(``verification_submit`` + ``verification_run``). Target: p50 <= 10 ms after the commit.

Reuses ``bench_api.py``'s machinery (scratch database ``bench_api_<name>``, its own Celery queues deleted at the end,
every process it starts killed at the end). PostgreSQL and Redis only; anything else is skipped with a message.
A benchmark, not a test: nothing here asserts a timing.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import socket
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
COUNT = int(os.environ.get("BENCH_WAIT_COUNT", "200"))
ROUNDS = 4
WAIT_MS = 5000


def _bench_api() -> Any:
    spec = importlib.util.spec_from_file_location("bench_api", BENCH_DIR / "bench_api.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_api"] = module
    spec.loader.exec_module(module)
    return module


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


class Announcements:
    """Every run announcement on the broker (``reviewportal:run:*``), heard by a thread of this process: the time
    each was made, which its message carries (``run_signal.announce``: right after the run's commit returned)."""

    def __init__(self, broker: str) -> None:
        import redis

        from verification.runs.run_signal import CHANNEL_PREFIX

        self.prefix = CHANNEL_PREFIX
        self.made: dict[str, float] = {}
        self._pubsub = redis.Redis.from_url(broker).pubsub(ignore_subscribe_messages=True)
        self._pubsub.psubscribe(**{f"{CHANNEL_PREFIX}*": self._handler})
        self._thread = self._pubsub.run_in_thread(sleep_time=0.5, daemon=True)

    def _handler(self, message: dict[str, Any]) -> None:
        self.made[message["channel"].decode().removeprefix(self.prefix)] = float(message["data"])

    def made_at(self, verification_id: str, timeout: float = 2.0) -> float | None:
        deadline = time.monotonic() + timeout
        while verification_id not in self.made and time.monotonic() < deadline:
            time.sleep(0.001)
        return self.made.get(verification_id)

    def close(self) -> None:
        self._thread.stop()  # the thread closes its subscription itself when it ends
        self._thread.join(timeout=5)


def _waits(
    api: Any, port: int, world: Any, count: int, heard: Announcements
) -> tuple[list[float], list[float], list[float], list[Any]]:
    """``count`` wait_ms submissions: (answer minus the run's commit, answer minus the run's last write, request
    seconds, unexpected answers)."""
    from verification.runs.models import Event

    client = api.Client(port, world.agent_raw)
    after_commit: list[float] = []
    after_write: list[float] = []
    request_s: list[float] = []
    unexpected: list[Any] = []
    try:
        for _ in range(count):
            _, body = world.next_subject()
            t0 = time.perf_counter()
            status, doc = client.request("POST", "/v1/verifications", {**body, "wait_ms": WAIT_MS})
            answered = datetime.now(UTC)
            request_s.append(time.perf_counter() - t0)
            if status != 200 or not isinstance(doc, dict) or doc.get("status") != "succeeded":
                unexpected.append((status, doc))
                continue
            event = Event.objects.filter(verification_id=doc["id"], kind="verification.finished").first()
            committed = heard.made_at(doc["id"])
            if event is None or committed is None:
                unexpected.append(("no event" if event is None else "no announcement", doc["id"]))
                continue
            after_write.append((answered - event.created_at).total_seconds())
            after_commit.append(answered.timestamp() - committed)
    finally:
        client.close()
    return after_commit, after_write, request_s, unexpected


def main() -> str | None:  # noqa: PLR0915 - one run, start to end
    api = _bench_api()
    skipped = api._skip_reason()
    if skipped is not None:
        return f"bench_wait: skipped: {skipped}"
    broker = os.environ["CELERY_BROKER_URL"]
    token = secrets.token_hex(6)
    queue, direct_queue = f"bench-api-{token}", f"bench-api-direct-{token}"
    with tempfile.TemporaryDirectory(prefix="bench-wait-") as tmp:
        root = Path(tmp)
        (root / f"{api.SETTINGS_MODULE}.py").write_text(api.SETTINGS_TEXT, encoding="utf-8")
        (root / "logs").mkdir()
        var = root / "var"
        secret_key = secrets.token_urlsafe(50)
        for name in ("REVIEWPORTAL_SIGNING_KEY", "REVIEWPORTAL_SIGNING_KEY_FILE", "REVIEWPORTAL_TESTING"):
            os.environ.pop(name, None)
        os.environ.update({"DJANGO_SETTINGS_MODULE": api.SETTINGS_MODULE, "REVIEWPORTAL_VAR_DIR": str(var),
                           "SECRET_KEY": secret_key, "BENCH_API_QUEUE": direct_queue})
        sys.path.insert(0, str(root))
        import django

        try:
            django.setup()
        finally:
            os.environ.pop("SECRET_KEY", None)
        processes = api.Processes(root / "logs")
        try:
            with api._scratch_database() as connection:
                try:
                    from verification.trust.services.keys import signing_key_create

                    signing_key_create()
                    world = api._build_world()
                    env = {k: v for k, v in os.environ.items() if k not in api._SCRUBBED}
                    env.update({
                        "DJANGO_SETTINGS_MODULE": api.SETTINGS_MODULE,
                        "PYTHONPATH": os.pathsep.join([str(root), str(api.REPO_ROOT)]),
                        "DATABASE_URL": api._database_url(connection.settings_dict),
                        "CELERY_BROKER_URL": broker, "REVIEWPORTAL_VAR_DIR": str(var), "SECRET_KEY": secret_key,
                        "BENCH_API_QUEUE": queue, "PYTHONUNBUFFERED": "1",
                    })
                    port = api._free_port()
                    server_argv, server = api._server_argv(port)
                    processes.start("web", server_argv, env)
                    name = f"bench-wait-{token}@{socket.gethostname()}"
                    processes.start("worker", [
                        sys.executable, "-m", "celery", "-A", "reviewportal", "worker", "-Q", queue,
                        "--pool=prefork", "--concurrency=1", "--loglevel=WARNING",
                        "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", name,
                    ], env)
                    api._wait_until(lambda: api._healthy(port), api.START_SECONDS, processes)
                    api._wait_until(lambda: api._workers_answer([name]), api.START_SECONDS, processes)
                    heard = Announcements(broker)
                    try:
                        _waits(api, port, world, 10, heard)  # warm up: imports, connections, the key cache
                        api._direct(world, 10)
                        after: list[float] = []
                        after_write: list[float] = []
                        request: list[float] = []
                        direct: list[float] = []
                        unexpected: list[Any] = []
                        for _ in range(ROUNDS):
                            a, w, r, u = _waits(api, port, world, COUNT // ROUNDS, heard)
                            after += a
                            after_write += w
                            request += r
                            unexpected += u
                            direct += api._direct(world, COUNT // ROUNDS)[1]
                    finally:
                        heard.close()
                    processes.check()
                finally:
                    processes.stop()
        finally:
            api._forget_queues(broker, token)
    if not after:
        return f"bench_wait: no wait_ms submission answered 200: {str(unexpected[:1])[:300]}"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    ms = 1000
    return "\n".join([
        f"{len(after)} wait_ms={WAIT_MS} submissions over HTTP ({server}; 1 Celery worker, prefork, 1 child; Redis), "
        f"{ROUNDS} rounds alternating with the direct run; {len(unexpected)} unexpected answers; load average {load}; "
        f"{os.cpu_count()} CPUs",
        f"answer after the run's commit (its announcement, made when the commit returned): "
        f"p50 {ms * percentile(after, 0.5):.1f} ms, p95 {ms * percentile(after, 0.95):.1f} ms (target p50 <= 10 ms)",
        f"answer after the run's last write, before its commit (the commit's fsync included): "
        f"p50 {ms * percentile(after_write, 0.5):.1f} ms, p95 {ms * percentile(after_write, 0.95):.1f} ms",
        f"whole wait_ms request: p50 {ms * percentile(request, 0.5):.1f} ms, "
        f"p95 {ms * percentile(request, 0.95):.1f} ms; direct submit + run in process: "
        f"p50 {ms * percentile(direct, 0.5):.1f} ms",
        f"wait: p50 {ms * percentile(after, 0.5):.1f} ms after commit "
        f"({ms * percentile(after_write, 0.5):.1f} ms after the last write; "
        f"request p50 {ms * percentile(request, 0.5):.1f} ms, direct run p50 "
        f"{ms * percentile(direct, 0.5):.1f} ms)",
    ])


if __name__ == "__main__":
    sys.path.insert(0, str(BENCH_DIR.parent))
    print(main())
