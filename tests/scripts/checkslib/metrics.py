"""Live metrics: the Prometheus targets, series and alerts of a run."""
import json
import os

from .common import command, expect, load, load_lines


# ---- live metrics (tests/scripts/metrics_alerts.sh) ----

def http_json(url):
    """The JSON answer of a GET on url (a loopback server the test started)."""
    import urllib.request
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)


def wait_for(what, seconds, probe):
    """Calls probe() every 0.5 s until it returns a true value (returned) or seconds pass (Failed
    naming what, with probe's last answer)."""
    import time
    deadline, last, err = time.monotonic() + seconds, None, "none"
    while True:
        try:
            last = probe()
        except OSError as e:
            last = None
            err = e
        if last:
            return last
        if time.monotonic() > deadline:
            expect(False, f"{what}: not seen within {seconds} s (last answer {last if last is not None else err})")
        time.sleep(0.5)


@command(("run", str), ("world", int), ("base_port", int), ("host", str))
def metrics_targets(run, world, base_port, host):
    """The job's service-discovery file: one target per rank at 127.0.0.1:BASE+rank (one host),
    labelled with its rank, the host, the run folder and the step log's data snapshot and code
    version."""
    targets = load(f"{run}/prometheus-targets.json")
    expect(len(targets) == world, f"{len(targets)} targets, expected {world}")
    ident = load_lines(f"{run}/steps.rank0.jsonl")[0]
    for r, t in enumerate(targets):
        lab = t["labels"]
        expect(t["targets"] == [f"127.0.0.1:{base_port + r}"], f"rank {r}: targets {t['targets']}")
        expect(lab["rank"] == str(r) and lab["host"] == host and lab["run_dir"] == os.path.realpath(run),
               f"rank {r}: labels {lab}, expected host {host} and run_dir {os.path.realpath(run)}")
        expect(lab["data_snapshot"] == ident["data_snapshot_id"] and lab["code_version"] == ident["code_version"],
               f"rank {r}: labels {lab}, the step log says {ident['data_snapshot_id']} {ident['code_version']}")
    print(f"  {run}/prometheus-targets.json: {world} targets on ports {base_port}..{base_port + world - 1}, host {host}")


@command(("prometheus", str), ("run", str), ("world", int), ("host", str), ("seconds", int))
def prom_series(prometheus, run, world, host, seconds):
    """Prometheus (its HTTP API at PROMETHEUS) holds every rank's series of the run: each metric
    of the step loop once per rank, every one labelled with the run's host."""
    import urllib.parse
    run = os.path.realpath(run)
    names = ["shardtrain_step", "shardtrain_loss", "shardtrain_tokens_per_second", "shardtrain_learning_rate",
             "shardtrain_grad_norm", "shardtrain_mfu_ratio", "shardtrain_last_step_timestamp_seconds"]

    def probe():
        found = {}
        for n in names:
            q = urllib.parse.quote(f'{n}{{run_dir="{run}"}}')
            res = http_json(f"{prometheus}/api/v1/query?query={q}")["data"]["result"]
            found[n] = sorted((x["metric"].get("rank"), x["metric"].get("host")) for x in res)
        want = [(str(r), host) for r in range(world)]
        return found if all(v == want for v in found.values()) else None
    found = wait_for(f"every rank's series of {run} in Prometheus", seconds, probe)
    print(f"  Prometheus has {len(found)} metrics x ranks {[r for r, _ in found['shardtrain_step']]}, host {host}")


@command(("prometheus", str), ("run", str), ("host", str), ("port", int), ("restarts", int), ("world", int),
         ("verdict_class", str), ("culprit_rank", str), ("seconds", int))
def launcher_series(prometheus, run, host, port, restarts, world, verdict_class, culprit_rank, seconds):
    """The resilient launcher's endpoint is named in RUN/prometheus-launcher-targets.json
    (127.0.0.1:PORT, labelled with the run folder and HOST), and Prometheus holds its series of the
    run within SECONDS while an attempt runs: RESTARTS restarts, WORLD ranks, an exit status of the
    failed attempt, and the last verdict labelled VERDICT_CLASS, CULPRIT_RANK and HOST."""
    import urllib.parse
    run = os.path.realpath(run)
    targets = load(f"{run}/prometheus-launcher-targets.json")
    expect(len(targets) == 1 and targets[0]["targets"] == [f"127.0.0.1:{port}"],
           f"prometheus-launcher-targets.json: {targets}, expected one target 127.0.0.1:{port}")
    expect(targets[0]["labels"].get("run_dir") == run and targets[0]["labels"].get("host") == host,
           f"the launcher's target labels {targets[0]['labels']}, expected run_dir {run} and host {host}")

    def value(name):
        q = urllib.parse.quote(f'{name}{{run_dir="{run}"}}')
        res = http_json(f"{prometheus}/api/v1/query?query={q}")["data"]["result"]
        return res[0] if len(res) == 1 else None

    def probe():
        got = {n: value(f"shardtrain_launcher_{n}") for n in
               ("restarts", "world_size", "running", "last_exit_status", "last_verdict")}
        if any(v is None for v in got.values()):
            return None
        number = {n: float(v["value"][1]) for n, v in got.items()}
        if (number["restarts"], number["world_size"], number["running"]) != (restarts, world, 1):
            return None
        return got
    got = wait_for(f"the launcher's series of {run} in Prometheus ({restarts} restarts, {world} ranks, running)",
                   seconds, probe)
    verdict = got["last_verdict"]["metric"]
    expect(verdict.get("verdict_class") == verdict_class and verdict.get("culprit_rank") == culprit_rank
           and verdict.get("culprit_host") == host,
           f"the last verdict's labels {verdict}, expected {verdict_class} rank {culprit_rank} host {host}")
    status = float(got["last_exit_status"]["value"][1])
    expect(status != 0, "the failed attempt's exit status is 0 in Prometheus")
    print(f"  Prometheus: launcher of {run} on {host}: {restarts} restart(s), {world} ranks, last exit status "
          f"{status:g}, last verdict {verdict_class} rank {culprit_rank} host {host} (attempt {verdict.get('attempt')})")


def alert_matches(alert, name, labels):
    return alert["labels"].get("alertname") == name and all(alert["labels"].get(k) == v for k, v in labels.items())


def prometheus_alerts(prometheus, name, labels, states):
    """The alerts named `name` with `labels` in one of `states` ("pending", "firing") in Prometheus."""
    return [a for a in http_json(f"{prometheus}/api/v1/alerts")["data"]["alerts"]
            if a["state"] in states and alert_matches(a, name, labels)]


def alerts_of(prometheus, alertmanager, name, labels):
    """The alerts named `name` with `labels` firing in Prometheus, and those Alertmanager received."""
    am = [a for a in http_json(f"{alertmanager}/api/v2/alerts") if alert_matches(a, name, labels)]
    return prometheus_alerts(prometheus, name, labels, ("firing",)), am


@command(("prometheus", str), ("alertmanager", str), ("name", str), ("labels", str), ("seconds", int))
def alert_fires(prometheus, alertmanager, name, labels, seconds):
    """The alert NAME with LABELS (JSON object) is firing in Prometheus and received by
    Alertmanager within SECONDS; prints its labels and summary."""
    want = json.loads(labels)
    prom, am = wait_for(f"{name} {want} firing and in Alertmanager", seconds,
                        lambda: (lambda p, a: (p, a) if p and a else None)(*alerts_of(prometheus, alertmanager, name, want)))
    print(f"  {name} firing in Prometheus and received by Alertmanager: {am[0]['annotations'].get('summary')}")
    print(f"  labels {json.dumps({k: v for k, v in am[0]['labels'].items() if k not in ('data_snapshot', 'code_version')})}")


@command(("prometheus", str), ("name", str), ("labels", str), ("seconds", int))
def alert_pending(prometheus, name, labels, seconds):
    """The alert NAME with LABELS (JSON object, run_dir among them) is pending or firing in
    Prometheus within SECONDS (for an alert whose `for:` is longer than a test waits), and no other
    alert NAME of that run_dir is; prints its summary."""
    want = json.loads(labels)
    states = ("pending", "firing")
    mine = wait_for(f"{name} {want} pending in Prometheus", seconds,
                    lambda: prometheus_alerts(prometheus, name, want, states) or None)
    print(f"  {name} {mine[0]['state']} in Prometheus: {mine[0]['annotations'].get('summary')}")
    others = [a["labels"] for a in prometheus_alerts(prometheus, name, {"run_dir": want["run_dir"]}, states)
              if not alert_matches(a, name, want)]
    expect(not others, f"other {name} alerts of the run: {others}")


@command(("prometheus", str), ("alertmanager", str), ("run", str))
def no_alerts(prometheus, alertmanager, run):
    """No alert of the run (its run_dir label) is pending or firing in Prometheus, and none is in
    Alertmanager."""
    run = os.path.realpath(run)
    prom = [a for a in http_json(f"{prometheus}/api/v1/alerts")["data"]["alerts"] if a["labels"].get("run_dir") == run]
    am = [a for a in http_json(f"{alertmanager}/api/v2/alerts") if a["labels"].get("run_dir") == run]
    expect(not prom and not am, f"alerts of {run}: Prometheus {prom}, Alertmanager {am}")
    print(f"  no alert of {run} in Prometheus or Alertmanager")
