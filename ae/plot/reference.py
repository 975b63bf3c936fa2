"""The paper's numbers (REFERENCE 7.3, from upstream's ae/raw-reference CSVs).

PAPER[fig] is a list of (panel, series, [(x, y), ...]); the series names match
the measured ones so that both get one colour. Only the points REFERENCE 7.3
gives are here: a series drawn as one or two markers had no more.
For latency figures a point is (throughput, P50 us, P99 us).
"""

LABEL = "paper (8x ConnectX-6)"

PAPER = {
    "3a": [
        (None, "shared QP", [(96, 0.255)]),
        (None, "multiplexed QP (q=4)", [(96, 12.06)]),
        (None, "multiplexed QP (q=2)", [(96, 18.87)]),
        (None, "per-thread QP", [(32, 39.09), (96, 19.16)]),
        (None, "per-thread doorbell", [(96, 111.177)]),
    ],
    "3b": [
        (None, "per-thread QP", [(32, 37.44), (96, 19.13)]),
        (None, "per-thread doorbell", [(96, 90.55)]),
    ],
    "4": [
        ("read", "96 threads", [(8, 111.0), (32, 55.2)]),
        ("read", "84 threads", [(32, 62.4)]),
        ("read", "60 threads", [(16, 111.0)]),
        ("read", "48 threads", [(24, 111.0)]),
        ("write", "60 threads", [(16, 92.7)]),
        ("write", "96 threads", [(32, 63.0)]),
    ],
    "13a": [
        (None, "per-thread QP", [(96, 20.99)]),
        (None, "+ThrdResAlloc", [(96, 80.14)]),
        (None, "+WorkReqThrot", [(96, 109.52)]),
    ],
    "13b": [
        (None, "per-thread doorbell", [(8, 110.96), (32, 54.99)]),
        (None, "+WorkReqThrot", [(8, 108.75), (32, 108.75)]),   # "stays 107-110.5 for depth >= 8"
    ],
    "t1": [
        (None, "per-thread doorbell", [(8, 80.76), (2048, 65.75)]),
        (None, "+WorkReqThrot", [(8, 100.11), (2048, 109.58)]),
    ],
    "5a": [(None, "RACE", [(8, 1.574), (16, 0.533)])],
    "5b": [(None, "RACE", [(0.0, 3.73), (0.4, 3.64), (0.8, 3.79), (0.9, 3.11), (0.95, 1.22), (0.99, 0.67)])],
    "7": [
        ("ycsb-a", "RACE", [(1, 0.195), (2, 0.123), (3, 0.080), (4, 0.068), (5, 0.059), (6, 0.054)]),
        ("ycsb-a", "SMART-HT", [(1, 4.972), (2, 5.573), (3, 5.584), (4, 5.669), (5, 5.682), (6, 5.696)]),
        ("ycsb-b", "RACE", [(6, 0.714)]),
        ("ycsb-b", "SMART-HT", [(6, 37.05)]),
        ("ycsb-c", "RACE", [(6, 41.07)]),
        ("ycsb-c", "SMART-HT", [(6, 75.05)]),
    ],
    "8": [
        ("ycsb-c", "RACE", [(48, 11.50), (96, 6.455)]),
        ("ycsb-c", "+ThrdAwareAlloc", [(96, 23.942)]),
        ("ycsb-c", "+WorkReqThrot", [(96, 23.886)]),
        ("ycsb-c", "SMART-HT", [(96, 23.856)]),
        ("ycsb-b", "RACE", [(96, 5.128)]),
        ("ycsb-b", "+ThrdAwareAlloc", [(96, 3.064)]),
        ("ycsb-b", "+WorkReqThrot", [(96, 9.467)]),
        ("ycsb-b", "SMART-HT", [(96, 20.882)]),
        ("ycsb-a", "RACE", [(8, 2.80), (96, 0.201)]),
        ("ycsb-a", "+ThrdAwareAlloc", [(96, 0.193)]),
        ("ycsb-a", "+WorkReqThrot", [(96, 0.226)]),
        ("ycsb-a", "SMART-HT", [(96, 5.234)]),
    ],
    "9": [
        (None, "RACE", [(5.77, 105.9, 281.9)]),
        (None, "SMART-HT", [(15.64, 30.4, 57.4)]),
    ],
    # 14a throughput; 14b the paper's average attempts per op less one (= retries per op).
    "14": [
        ("throughput", "without ConflictAvoid", [(96, 0.176)]),
        ("throughput", "+Backoff", [(96, 1.429)]),
        ("throughput", "+DynBackoffLimit", [(96, 2.445)]),
        ("throughput", "+CoroThrot", [(96, 2.663)]),
        ("retries", "without ConflictAvoid", [(96, 11.06)]),
        ("retries", "+Backoff", [(96, 0.14)]),
        ("retries", "+DynBackoffLimit", [(96, 0.49)]),
        ("retries", "+CoroThrot", [(96, 0.38)]),
    ],
    "12": [
        ("ycsb-c", "Sherman+", [(94, 11.51)]),
        ("ycsb-c", "Sherman+ with SpecLookup", [(94, 16.81)]),
        ("ycsb-c", "SMART-BT", [(94, 23.16)]),
        ("ycsb-b", "Sherman+", [(94, 11.37)]),
        ("ycsb-b", "Sherman+ with SpecLookup", [(94, 13.59)]),
        ("ycsb-b", "SMART-BT", [(94, 20.81)]),
        ("ycsb-a", "Sherman+", [(94, 4.29)]),
        ("ycsb-a", "Sherman+ with SpecLookup", [(94, 4.46)]),
        ("ycsb-a", "SMART-BT", [(94, 5.00)]),
    ],
    "12so": [
        ("ycsb-c", "Sherman+", [(1, 11.41), (8, 51.45)]),
        ("ycsb-c", "SMART-BT", [(1, 23.11), (2, 45.91), (3, 66.95), (4, 89.67), (5, 109.61), (6, 123.98),
                                (7, 144.28), (8, 159.22)]),
        ("ycsb-b", "Sherman+", [(8, 32.48)]),
        ("ycsb-b", "SMART-BT", [(8, 41.88)]),
        ("ycsb-a", "Sherman+", [(8, 4.55)]),
        ("ycsb-a", "SMART-BT", [(8, 4.98)]),
    ],
    "10": [
        ("smallbank", "FORD+", [(24, 2.12), (96, 0.803)]),
        ("smallbank", "SMART-DTX", [(72, 4.648), (96, 4.628)]),
        ("tatp", "FORD+", [(48, 4.644), (96, 2.160)]),
        ("tatp", "SMART-DTX", [(80, 6.696), (96, 6.504)]),
    ],
    "11": [
        (None, "FORD+", [(0.89, 454, 1536)]),
        (None, "SMART-DTX", [(4.54, 137, 288)]),
    ],
}
