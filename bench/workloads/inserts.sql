-- Insert-heavy SQL for bench/compare (sqlite3 :memory: < inserts.sql).
CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, payload BLOB, score REAL);
CREATE INDEX t_name ON t(name);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000)
INSERT INTO t(name, payload, score) SELECT 'name-' || (x * 7919 % 100003), randomblob(40), x / 3.0 FROM c;
SELECT count(*), count(DISTINCT name) FROM t;
