"""A fault harness for rockstalk's cluster mode (issue 27): every node in a
network namespace of its own on one bridge, faults (partitions, one-way
cuts, SIGSTOP, kill -9) on a schedule drawn from a seed, a recorded
workload and checkers over its history.

    netns.py     namespaces, the bridge, veths, blackhole routes; cleanup
    nodes.py     a cluster of rockstalkd nodes, one per namespace (mTLS)
    workload.py  producers and workers on every node, each request and
                 reply recorded with its times
    nemesis.py   the faults and a seeded schedule of them
    checker.py   what the history must satisfy
    run.py       one round (start, load, fault, heal, drain, check) and the
                 `make chaos` command line

Needs root (network namespaces); refuses to run otherwise (NetError).
"""
