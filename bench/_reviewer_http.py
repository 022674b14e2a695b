"""Reviewer actions over real HTTP for ``bench_queue`` (issue 15): a gunicorn serving the benchmark's database, one
reviewer signed in, and per round, in turn: a trivial view through the same middleware (``/_bench/trivial``), the
queue page (``GET /queue/``), "Next item" (``POST /queue/claim-next``, which claims and redirects) with the review
page it opens, and a decision (``POST …/decide``, FAIL with a rationale: the copies carry no evidence to cite, so a
PASS is impossible; it records the decision and claims the next item) with the page it redirects to (the next claimed
item, its chain re-verified), timed together and the POST alone. Each client request
opens a new connection (gunicorn's sync workers do not keep connections alive). Wall time in the client."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

REPO_ROOT = Path(__file__).resolve().parents[1]
_CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
_REQUEST_KEY = re.compile(r'name="request_key" value="([^"]+)"')
_DECIDE = re.compile(r'action="(/review/[0-9a-f-]+/decide)"')


#: Label Studio's p50s for the same three actions, from issue 15 ("Every reviewer action at a third of Label Studio's
#: time": measured side by side on this machine at 100,000 items, runserver, DEBUG off, a new connection per request,
#: one reviewer): its task list 106 ms, ``/next`` 89 ms, the annotation POST 48 ms. The goal is a third of each.
LABEL_STUDIO_P50_MS: dict[str, float] = {"queue": 106.0, "claim": 89.0, "decide": 48.0}
LABEL_STUDIO_GOAL = 1 / 3
#: What each of our actions is compared with.
LABEL_STUDIO_ACTIONS = {"queue": "task list", "claim": "/next", "decide": "annotation POST"}


@dataclass
class HttpFigures:
    samples: dict[str, list[float]] = field(default_factory=dict)
    refused: int = 0  # decisions the portal refused (redirected back with a refusal)
    workers: int = 1
    rounds: int = 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_up(base: str, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    import requests

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {proc.returncode}")
        try:
            requests.get(base + "/_bench/trivial", timeout=2)
            return
        except requests.RequestException:
            time.sleep(0.2)
    raise RuntimeError("gunicorn did not answer")


def _timed(call: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def measure(*, database_url: str, session_key: str, secret_key: str, rounds: int, warm_up: int = 5,
            workers: int = 1) -> HttpFigures:
    """``rounds`` rounds of the four requests with a session already signed in (``session_key``)."""
    import requests

    port = _free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench._http_settings",
        "DATABASE_URL": database_url,
        "SECRET_KEY": secret_key,
        "PYTHONPATH": str(REPO_ROOT),
    }
    gunicorn = str(Path(sys.executable).with_name("gunicorn"))
    proc = subprocess.Popen(  # noqa: S603 - our own virtualenv's gunicorn
        [gunicorn, "reviewportal.wsgi:application", "-b", f"127.0.0.1:{port}", "-w", str(workers),
         "--log-level", "warning"],
        cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    actions = ("trivial", "queue", "claim", "decide", "decide-post")
    figures = HttpFigures(samples={k: [] for k in actions}, workers=workers)
    try:
        _wait_up(base, proc)
        http = requests.Session()
        http.cookies.set("sessionid", session_key, domain="127.0.0.1")
        page = http.get(base + "/queue/", timeout=30)
        assert page.status_code == 200 and b"data-queue-row=" in page.content, page.status_code
        review: Any = None
        for i in range(warm_up + rounds):
            timed = i >= warm_up
            elapsed, r = _timed(lambda: http.get(base + "/_bench/trivial", timeout=30))
            assert r.status_code == 200 and r.text == "ok", r.status_code
            if timed:
                figures.samples["trivial"].append(elapsed)
            elapsed, page = _timed(lambda: http.get(base + "/queue/", timeout=30))
            assert page.status_code == 200, page.status_code
            if timed:
                figures.samples["queue"].append(elapsed)
            if review is None:  # claim the next item and open it (a decision's redirect already did, after the first)
                token = _CSRF.search(page.text)
                assert token is not None
                elapsed, review = _timed(lambda t=token: http.post(
                    base + "/queue/claim-next", data={"csrfmiddlewaretoken": t.group(1)}, timeout=30))
                assert review.status_code == 200 and "/review/" in review.url, (review.status_code, review.url)
                if timed:
                    figures.samples["claim"].append(elapsed)
            action, key, token = _DECIDE.search(review.text), _REQUEST_KEY.search(review.text), _CSRF.search(
                review.text)
            assert action and key and token, f"no decision form on {review.url}"
            data = {"csrfmiddlewaretoken": token.group(1), "request_key": key.group(1), "verdict": "FAIL",
                    "rationale": "bench: the output does not match the contract"}
            # The decision's POST (it records the decision and claims the next item, answering 303/302), then the
            # page it redirects to; timed apart and together.
            posted_s, posted = _timed(lambda d=data, a=action: http.post(
                base + a.group(1), data=d, timeout=30, allow_redirects=False))
            assert posted.is_redirect, posted.status_code
            location = posted.headers["Location"]
            opened_s, after = _timed(lambda loc=location: http.get(urljoin(base, loc), timeout=30))
            assert after.status_code == 200, after.status_code
            refused = "#refusal" in location
            figures.refused += int(refused and timed)
            if timed:
                figures.samples["decide"].append(posted_s + opened_s)
                figures.samples["decide-post"].append(posted_s)
            # The decision redirects to the next claimed item: measure a fresh claim every other round.
            review = after if (i % 2 == 0 and "/review/" in after.url and not refused) else None
            figures.rounds += int(timed)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    return figures



def against_label_studio(p50_ms: dict[str, float]) -> str:
    """Our three actions' p50s (``p50_ms``, by action) against Label Studio's (``LABEL_STUDIO_P50_MS``) and the goal
    of a third of each."""
    parts = []
    for action, theirs in LABEL_STUDIO_P50_MS.items():
        ours = p50_ms[action]
        goal = theirs * LABEL_STUDIO_GOAL
        parts.append(
            f"{action} {ours:.1f} ms vs {LABEL_STUDIO_ACTIONS[action]} {theirs:.0f} ms = {ours / theirs:.2f} "
            f"(goal <= {goal:.0f} ms: {'met' if ours <= goal else 'not met'})"
        )
    return "(d) p50 against Label Studio (issue 15's figures, one reviewer, 100,000 items): " + "; ".join(parts) + "."
