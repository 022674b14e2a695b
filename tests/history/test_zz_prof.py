import time
import pytest
from django.utils import timezone
from tests.history.conftest import *  # noqa
from tests.history.conftest import client_for
pytestmark = pytest.mark.django_db
def test_prof(bulk, manager):
    t=time.perf_counter(); bulk.add(100_000, step=timezone.timedelta(milliseconds=10)); print("bulk", time.perf_counter()-t)
    c = client_for(manager)
    for kind in ("csv","jsonl"):
        t=time.perf_counter(); r=c.get(f"/history/export.{kind}"); n=sum(len(x) for x in r.streaming_content); print(kind, n, time.perf_counter()-t)
    from verification import history_selectors as hs
    qs = hs.export_rows(filters={}, now=timezone.now())
    t=time.perf_counter(); n=sum(1 for _ in qs.iterator(chunk_size=2000)); print("rows only", n, time.perf_counter()-t)
    from django.db import connection
    with connection.cursor() as cur:
        sql, params = qs.query.sql_with_params()
        t=time.perf_counter(); cur.execute("EXPLAIN ANALYZE " + sql, params) if connection.vendor=="postgresql" else None
        if connection.vendor=="postgresql":
            for row in cur.fetchall()[:40]: print(row[0])
        print("explain", time.perf_counter()-t)
