"""The report of ``envkit verify --nodes N``: every node's lines read back from srun --label, judged together
(PASS only when every node passed and the all-reduce across them is right), printed, and kept in the record."""

import json
from typing import Any, Optional

import typer


def _json_documents(lines: list[str]) -> list[dict[str, Any]]:
    """The JSON objects a task printed. srun --label cuts a long line into pieces, each labelled: the pieces are
    joined again (a JSON document has no raw newline inside, so nothing is lost) and read one document after the
    other."""
    text = "".join(lines)
    decoder = json.JSONDecoder()
    found, at = [], text.find("{")
    while at != -1:
        try:
            value, end = decoder.raw_decode(text, at)
        except ValueError:
            at = text.find("{", at + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        at = text.find("{", end)
    return found


def read_tasks(stdout: str, stderr: str, nodes: int, partition: str) -> dict[str, Any]:
    """The outcome: ``{"ok", "partition", "nodes": [per node], "all_reduce": {...}, "diagnosis": [...]}``."""
    from envkit.probe.cross_node import CROSS_NODE_BYTES, bandwidth, diagnose, differences, pair_bandwidths
    from envkit.slurm.multinode import labelled_lines

    out, err = labelled_lines(stdout), labelled_lines(stderr)
    summaries: list[dict[str, Any]] = []
    results: list[Optional[dict[str, Any]]] = []
    for task in range(nodes):
        documents = _json_documents(out.get(task, []))
        hello = next((d for d in documents if "envkit_node" in d), {})
        collective = next((d["cross_node"] for d in documents if isinstance(d.get("cross_node"), dict)), None)
        report = next((d for d in documents if "framework" in d and "ok" in d), None)
        name = hello.get("envkit_node") or (collective or {}).get("node") or f"task {task}"
        words = [line.strip() for line in err.get(task, []) if line.strip() and not line.startswith("envkit: ")]
        errors = [line for line in err.get(task, []) if line.startswith("envkit: error")]
        summary: dict[str, Any] = {"node": name, "task": task, "ok": bool(report and report.get("ok"))}
        if report is not None:
            machine = report.get("machine") or {}
            summary.update(version=report.get("version"), cuda=report.get("cuda"),
                           driver=machine.get("driver_version") or machine.get("driver"),
                           devices=report.get("devices", []),
                           why=[f"{d.get('cause')}" for d in report.get("diagnosis", []) if d.get("fails")])
        else:
            summary["why"] = [(errors or words or ["no report came back from this node"])[-1]]
        summaries.append(summary)
        results.append(collective)
    done = [r for r in results if r is not None]
    algbw, busbw = bandwidth(done) if len(done) == nodes else (None, None)
    first = done[0] if done else {}
    # A framework with no all-reduce across nodes (MXNet): every rank says so, and the all-reduce is neither passed
    # nor failed (ok None): what was checked and what was not is said instead.
    skipped = first.get("skipped") if len(done) == nodes and all(r.get("skipped") for r in done) else None
    all_reduce = {"ok": None if skipped else len(done) == nodes and all(r.get("ok") for r in done), "nodes": nodes,
                  "framework": next((r.get("framework") for r in done if r.get("framework")), None),
                  "method": first.get("method"), "skipped": skipped,
                  "backend": first.get("backend"), "bytes": first.get("bytes") or CROSS_NODE_BYTES,
                  "expected": first.get("expected"), "results": [] if skipped else [r.get("got") for r in done],
                  "correct": None if skipped else len(done) == nodes and all(r.get("correct") is True for r in done),
                  "address": first.get("address"), "port": first.get("port"), "algbw_gbs": algbw,
                  "busbw_gbs": busbw, "ranks": done,
                  "pairs": pair_bandwidths([s["node"] for s in summaries], done) if len(done) == nodes else []}
    ok = all(s["ok"] for s in summaries) and all_reduce["ok"] is not False
    diagnosis = [] if ok else diagnose(summaries, results)
    return {"ok": ok, "partition": partition, "nodes": summaries, "all_reduce": all_reduce, "diagnosis": diagnosis,
            "notes": differences(summaries, all_reduce["pairs"])}


def render(outcome: dict[str, Any], json_output: bool) -> None:
    if json_output:
        from envkit.commands.output import print_json

        print_json(outcome)
        return
    nodes = outcome["nodes"]
    lines = [f"Across {len(nodes)} nodes of {outcome['partition']}: {', '.join(n['node'] for n in nodes)}"]
    for node in nodes:
        build = f" ({node.get('version')}, CUDA {node.get('cuda') or 'none'})" if node.get("version") else ""
        why = "" if node["ok"] else ": " + "; ".join(node.get("why") or ["failed"])
        lines.append(f"  {node['node']}: {'PASS' if node['ok'] else 'FAIL'}{build}{why}")
    ar = outcome["all_reduce"]
    size = f"{ar['bytes'] / 2 ** 20:g} MiB per node"
    how = ", ".join(filter(None, [ar.get("method"), ar["backend"]]))
    if ar["ok"] is None:
        lines.append(f"Across the {ar['nodes']} nodes: not checked: {ar['skipped']}")
    elif ar["ok"]:
        got = ", ".join(f"{value:g}" for value in ar["results"] if isinstance(value, (int, float)))
        speed = (f"; bus bandwidth {ar['busbw_gbs']:g} GB/s (algorithm bandwidth {ar['algbw_gbs']:g} GB/s)"
                 if ar["busbw_gbs"] is not None else "")
        lines.append(f"All-reduce across {ar['nodes']} nodes ({how}, {size}, rendezvous "
                     f"{ar['address']}:{ar['port']}): sum {got} (expected {ar['expected']:g}): right{speed}")
    else:
        lines.append(f"All-reduce across {ar['nodes']} nodes ({how or 'not started'}, {size}, rendezvous "
                     f"{ar['address']}:{ar['port']}): FAILED")
    if ar["pairs"]:
        lines.append("  pairs: " + ", ".join(f"{' and '.join(p['nodes'])} {p['busbw_gbs']:g} GB/s"
                                             f"{' (slow)' if p['slow'] else ''}" for p in ar["pairs"]))
    for item in outcome["diagnosis"]:
        lines += [f"  - {item['cause']}", f"    Next: {item['advice']}"]
    for item in outcome["notes"]:
        lines += [f"Note: {item['cause']}", f"  {item['advice']}"]
    if outcome["ok"]:
        lines.append("PASS: every node passed and the all-reduce across them is right" if ar["ok"] else
                     "PASS: every node passed; nothing across the nodes was checked")
    else:
        lines.append("FAIL: " + ", ".join(n["node"] for n in nodes if not n["ok"]) + (" failed" if any(
                     not n["ok"] for n in nodes) else "every node passed") + (
                     "" if ar["ok"] is not False else "; the all-reduce across the nodes failed"))
    typer.echo("\n".join(lines))


def store(record, outcome: dict[str, Any]) -> None:
    """Into the record: the check across nodes, with the nodes it ran on (unless the environment was replaced)."""
    from datetime import datetime, timezone

    from envkit.commands.places import user_dirs
    from envkit.create.lock import name_lock
    from envkit.state import ownership, records

    nodes = outcome["nodes"]
    ar = outcome["all_reduce"]
    summary = {"ok": outcome["ok"], "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "version": next((n.get("version") for n in nodes if n.get("version")), None),
               "causes": [d["cause"] for d in outcome["diagnosis"]] or [w for n in nodes for w in n.get("why", [])],
               "on_target": True, "machines": [n["node"] for n in nodes], "nodes": [n["node"] for n in nodes],
               "partition": outcome["partition"],
               "all_reduce": {key: ar[key] for key in ("ok", "framework", "backend", "bytes", "busbw_gbs")}}
    dirs = user_dirs()
    with name_lock(dirs.locks, record.name):
        current = records.load(dirs.records, record.name)
        if current is not None and current.created == record.created and current.prefix == record.prefix:
            ownership.update(records.with_verify(current, summary), dirs.records)
