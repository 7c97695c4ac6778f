"""`make bench` as a package: `python3 -m bench --help` (from the repository root).

| module | what it holds |
|---|---|
| `rows.py` | the table: one row per command (native line, twin, denied mode, floor) |
| `resp.py` | a small RESP client |
| `server.py` | the throwaway server, CPU pinning |
| `plan.py` | rows to command lines (each twin's EVALSHA call) |
| `measure.py` | redis-benchmark runs, the server's cost per call, the spread of the runs |
| `bulk.py` | the bulk TTL sweep against the published loop |
| `scale.py` | cost and memory with many live keys |
| `peers.py` | runs `limits_client.py` (the `limits` library, in the virtualenv) |
| `log_cost.py` | RL.LOG's cost against the entries in its window |
| `lease_cost.py` | RL.LEASE's cost against the leases a key holds (also `python3 -m bench.lease_cost` alone) |
| `estimate.py` | `--plan`: each row's requests and runs, and the last results' seconds |
| `compare.py` | two builds of the module against each other (`--compare-module`) |
| `floor.py` | builds the floor module `floor/floor.c` |
| `criterion.py` | the pure crate's micro-benchmarks |
| `report.py`, `chart.py` | the tables, the CSV and the SVG chart |
| `failover.py` | `make bench-failover`: grants given again when a primary is killed, and what WAIT and `appendfsync always` cost |
| `longest.py` | `make bench-longest`: the longest single calls at the bounds, from the slow log |
| `local_budget.py` | `make bench-budget`: the Python package's local budgets on one hot key, 2, 4 and 8 processes, against plain calls (needs the package: it runs in the virtualenv) |

Standard library only (the peer rows run in the virtualenv, in their own process).
"""

import sys

sys.dont_write_bytecode = True  # no __pycache__ next to the results
