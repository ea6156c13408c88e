#!/usr/bin/env python3
"""All-smi-shaped metrics endpoints on 127.0.0.1, for scripts/perf-check.sh.

    scripts/allsmi-serve.py FIRST_PORT COUNT HOSTS_FILE

Serves COUNT endpoints on FIRST_PORT.. (one 8-GPU node each, `instance="node-NNNN"`), shaped
as all-smi 0.25's mock server answers without MIG (tests/fixtures/allsmi/mock-0.25.0-mig.prom
less its MIG instance rows, MIG mode off), with each card's UUID made unique per node and the
utilisation, power and memory values moved at every request as the mock moves them. Writes
one `127.0.0.1:PORT` a line to HOSTS_FILE once every port listens (all-smi's --hostfile form).
Runs until killed. Needs only Python 3's standard library.
"""

import http.server
import os
import random
import re
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "tests", "fixtures", "allsmi", "mock-0.25.0-mig.prom")

MOVING = ("all_smi_gpu_utilization", "all_smi_gpu_power_consumption_watts", "all_smi_gpu_memory_used_bytes")


def template():
    lines = []
    with open(FIXTURE, encoding="utf-8") as f:
        for line in f:
            if "all_smi_mig_instance_" in line:
                continue
            if line.startswith("all_smi_gpu_mig_mode"):
                line = re.sub(r" \S+$", " 0", line.rstrip("\n")) + "\n"
            lines.append(line)
    return lines


def node_lines(lines, n):
    name = "node-%04d" % n
    out = []
    for line in lines:
        line = line.replace('instance="node-0001"', 'instance="%s"' % name)
        # A unique UUID per node: its first eight hex digits carry the node's number.
        line = re.sub(r'gpu_uuid="[0-9A-F]{8}', lambda m: 'gpu_uuid="%08X' % n, line)
        out.append(line)
    return out


def render(lines, rng):
    out = []
    for line in lines:
        if line.startswith(MOVING):
            head, _, value = line.rstrip("\n").rpartition(" ")
            v = float(value) * rng.uniform(0.9, 1.1)
            if line.startswith("all_smi_gpu_utilization"):
                v = min(v, 100.0)
            line = "%s %.2f\n" % (head, v) if "bytes" not in head else "%s %d\n" % (head, v)
        out.append(line)
    return "".join(out).encode()


def serve(port, lines, ready):
    rng = random.Random(port)

    class Handler(http.server.BaseHTTPRequestHandler):
        # HTTP/1.1: connections kept alive between requests, as all-smi's own server (axum)
        # and dcgm-exporter (Go's net/http) keep them.
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            if self.path != "/metrics":
                self.send_error(404)
                return
            body = render(lines, rng)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    ready.release()
    server.serve_forever()


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: allsmi-serve.py FIRST_PORT COUNT HOSTS_FILE")
    first, count, hosts = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    lines = template()
    ready = threading.Semaphore(0)
    for i in range(count):
        t = threading.Thread(target=serve, args=(first + i, node_lines(lines, i + 1), ready), daemon=True)
        t.start()
    for _ in range(count):
        ready.acquire()
    with open(hosts + ".tmp", "w", encoding="utf-8") as f:
        for i in range(count):
            f.write("127.0.0.1:%d\n" % (first + i))
    os.replace(hosts + ".tmp", hosts)
    threading.Event().wait()


if __name__ == "__main__":
    main()
