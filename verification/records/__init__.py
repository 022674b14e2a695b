"""Records (issue 6): verdict history, timelines, dashboards and their rollups, exports, metrics."""
