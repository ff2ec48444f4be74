# Builds, dumps and loads JSON: an allocation-heavy python3 workload for bench/compare.
import json
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
rows = [{"id": i, "name": "item-%d" % i, "tags": ["a", "b", str(i % 97)], "score": i * 0.5} for i in range(n)]
text = json.dumps(rows)
back = json.loads(text)
print("json:", len(text), len(back))
