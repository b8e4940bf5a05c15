"""TLS and SASL cost: the same confluent-kafka workload against one broker over PLAINTEXT, SSL and SASL_SSL
(SCRAM-SHA-512) listeners, in the same run.

10 KB records, 1 and 8 partitions: produce N bytes with acks=1 (bench_broker's client settings), then consume
them with assign() from the beginning. Each run starts a fresh broker (`epoch-broker serve` with the three
listeners and a test CA made here with trustme) and measures every listener, the order rotated per run so
that drift on the machine hits each alike. Reported: median MB/s of the runs (min-max), and the ratio to
PLAINTEXT within each run, median (min-max). Under TLS the broker cannot sendfile (the bytes are encrypted in
the process), so consuming pays a copy and the cipher, as Kafka's does.

    python -m bench.bench_security [--runs 3] [--scale 1.0]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import trustme

from bench.bench_broker import MB, consume, create_topic, produce
from bench.common import fmt_spread, free_port, print_table, start_ours, write_results

CASES = [(10_000, 1, 200), (10_000, 8, 200)]  # (record size, partitions, MB at scale 1.0)
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bench="bench-secret";'
LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
Figures = dict[str, float]  # "<listener>/<partitions>/<produce|consume>" -> MB/s


def _pki(directory: Path) -> tuple[str, str]:
    """(server PEM with its key, CA PEM) of a fresh test CA."""
    ca = trustme.CA()
    server, ca_file = directory / "server.pem", directory / "ca.pem"
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(server))
    ca.cert_pem.write_to_path(str(ca_file))
    return str(server), str(ca_file)


def _client(listener: str, ca_file: str) -> dict[str, str]:
    if listener == "PLAINTEXT":
        return {}
    if listener == "SSL":
        return {"security.protocol": "SSL", "ssl.ca.location": ca_file}
    return {"security.protocol": "SASL_SSL", "ssl.ca.location": ca_file, "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "bench", "sasl.password": "bench-secret"}


def run_once(run: int, scale: float, workdir: Path) -> Figures:
    server_pem, ca_file = _pki(workdir)
    ports = {name: free_port() for name in LISTENERS[1:]}
    overrides = {"ssl.keystore.location": server_pem, "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS}
    figures: Figures = {}
    with start_ours(workdir, overrides, ports) as broker:
        for listener in LISTENERS[run % 3:] + LISTENERS[:run % 3]:
            address = broker.bootstrap if listener == "PLAINTEXT" else f"127.0.0.1:{ports[listener]}"
            client = _client(listener, ca_file)
            for size, partitions, mbytes in CASES:
                count = max(1, int(mbytes * scale * MB / size))
                topic = f"bench-{listener}-{partitions}-{time.time_ns()}"
                create_topic(address, topic, partitions, client)
                moved = count * size / MB
                figures[f"{listener}/{partitions}/produce"] = moved / produce(address, topic, size, count,
                                                                              partitions, client=client)
                figures[f"{listener}/{partitions}/consume"] = moved / consume(address, topic, count, partitions,
                                                                              client)
                print(f"  run {run + 1} {listener} {partitions}p: produce "
                      f"{figures[f'{listener}/{partitions}/produce']:.0f} MB/s, consume "
                      f"{figures[f'{listener}/{partitions}/consume']:.0f} MB/s", flush=True)
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.bench_security")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args(argv)
    runs: list[Figures] = []
    with tempfile.TemporaryDirectory(prefix="bench-security-") as tmp:
        for run in range(args.runs):
            workdir = Path(tmp) / f"run{run}"
            workdir.mkdir()
            runs.append(run_once(run, args.scale, workdir))
    rows = []
    for partitions in sorted({p for _, p, _ in CASES}):
        for direction in ("produce", "consume"):
            base = [r[f"PLAINTEXT/{partitions}/{direction}"] for r in runs]
            row = [f"10 KB, {partitions}p, {direction}", fmt_spread(base, 0)]
            for listener in LISTENERS[1:]:
                values = [r[f"{listener}/{partitions}/{direction}"] for r in runs]
                ratios = [v / b for v, b in zip(values, base, strict=True)]
                row += [fmt_spread(values, 0), fmt_spread(ratios, 2)]
            rows.append(row)
    print_table(f"MB/s, median (min-max) of {args.runs} runs; ratio to PLAINTEXT in the same run",
                ["case", "PLAINTEXT", "SSL", "SSL/PT", "SASL_SSL", "SASL_SSL/PT"], rows)
    print(f"results: {write_results('security', {'runs': runs, 'scale': args.scale})}")


if __name__ == "__main__":
    main()
