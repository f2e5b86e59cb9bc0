#!/usr/bin/python3
"""Checks contrib/kubernetes/ without a cluster: parses every YAML document
and checks the fields a shardfs deployment depends on. Prints one
"ok - ..." or "FAIL - ...: why" line per check (test_kubernetes.sh counts
them) and writes, for the shell suite to exercise with the real binary:
OUT/dataset.conf (the ConfigMap's config), OUT/mount_path, OUT/ready.json,
OUT/prestop.json and OUT/init.json (the readiness probe's, the preStop
hook's and the init container's commands), OUT/trainer.json and
OUT/trainer_root (the trainer's command and where it sees the mount),
and from the Dockerfile: OUT/docker-packages (the runtime stage's apt
packages), OUT/docker-build-packages (the build stage's),
OUT/docker-build-copies (the paths the build stage copies from the
repository, one a line) and OUT/docker-build-run (its RUN commands).

    check_k8s.py CONTRIB_KUBERNETES_DIR OUT_DIR

Needs python3-yaml (Debian).
"""
import configparser
import glob
import json
import os
import re
import sys

import yaml

results = []


def check(name, cond, why=""):
    results.append(cond)
    print(("ok - %s" % name) if cond else ("FAIL - %s%s" % (name, ": " + why if why else "")))
    return cond


# Field names of the objects used here (Kubernetes API v1 / apps/v1 /
# batch/v1): a misspelt key (mountPropogation) is silently ignored by some
# tools, so it is caught here.
KNOWN = {
    "container": {"name", "image", "command", "args", "env", "securityContext",
                  "resources", "volumeMounts", "readinessProbe", "livenessProbe",
                  "startupProbe", "lifecycle", "imagePullPolicy", "workingDir", "ports"},
    "volumeMount": {"name", "mountPath", "readOnly", "mountPropagation", "subPath"},
    "volume": {"name", "hostPath", "configMap", "emptyDir", "secret"},
    "hostPath": {"path", "type"},
    "probe": {"exec", "initialDelaySeconds", "periodSeconds", "timeoutSeconds",
              "failureThreshold", "successThreshold"},
    "podSpec": {"containers", "initContainers", "volumes", "priorityClassName",
                "terminationGracePeriodSeconds", "nodeSelector", "tolerations",
                "restartPolicy", "securityContext", "serviceAccountName", "hostNetwork"},
    "toleration": {"key", "operator", "value", "effect", "tolerationSeconds"},
}
# Taints GPU nodes commonly carry (GKE and the NVIDIA GPU operator:
# nvidia.com/gpu, with value "present" on GKE; AMD's device plugin
# deployments: amd.com/gpu): the daemon must run where trainers do.
GPU_TAINTS = [
    {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
    {"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"},
    {"key": "amd.com/gpu", "value": "", "effect": "NoSchedule"},
]


def tolerates(tol, taint):
    """Kubernetes' rule (core/v1 Toleration.ToleratesTaint)."""
    if tol.get("effect") and tol["effect"] != taint["effect"]:
        return False
    if tol.get("key") and tol["key"] != taint["key"]:
        return False
    if not tol.get("key") and tol.get("operator") != "Exists":
        return False
    if tol.get("operator", "Equal") == "Exists":
        return True
    return tol.get("value", "") == taint.get("value", "")


def tolerated(spec, taint):
    return any(tolerates(t, taint) for t in spec.get("tolerations", []))
HOSTPATH_TYPES = {"", "DirectoryOrCreate", "Directory", "FileOrCreate", "File",
                  "Socket", "CharDevice", "BlockDevice"}


def unknown(kind, obj):
    return sorted(set(obj) - KNOWN[kind])


def pod_spec(doc):
    if doc["kind"] == "Pod":
        return doc["spec"]
    return doc["spec"]["template"]["spec"]


def check_pod_fields(where, spec):
    bad = ["podSpec:" + k for k in unknown("podSpec", spec)]
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        bad += ["container:" + k for k in unknown("container", c)]
        for m in c.get("volumeMounts", []):
            bad += ["volumeMount:" + k for k in unknown("volumeMount", m)]
            if m.get("mountPropagation") not in (None, "None", "HostToContainer", "Bidirectional"):
                bad.append("mountPropagation=" + str(m["mountPropagation"]))
        for p in ("readinessProbe", "livenessProbe", "startupProbe"):
            if p in c:
                bad += ["probe:" + k for k in unknown("probe", c[p])]
    for t in spec.get("tolerations", []):
        bad += ["toleration:" + k for k in unknown("toleration", t)]
        if t.get("operator", "Equal") not in ("Equal", "Exists"):
            bad.append("toleration operator " + str(t["operator"]))
        if t.get("operator") == "Exists" and t.get("value"):
            bad.append("toleration with operator Exists and a value")
        if t.get("effect", "") not in ("", "NoSchedule", "PreferNoSchedule", "NoExecute"):
            bad.append("toleration effect " + str(t["effect"]))
    for v in spec.get("volumes", []):
        bad += ["volume:" + k for k in unknown("volume", v)]
        if "hostPath" in v:
            bad += ["hostPath:" + k for k in unknown("hostPath", v["hostPath"])]
            if v["hostPath"].get("type", "") not in HOSTPATH_TYPES:
                bad.append("hostPath type " + v["hostPath"]["type"])
    names = [v["name"] for v in spec.get("volumes", [])]
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        for m in c.get("volumeMounts", []):
            if m["name"] not in names:
                bad.append("volumeMount of undeclared volume " + m["name"])
    check("%s: only known fields, every mounted volume declared" % where, not bad, ", ".join(bad))


def shell_text(cmd):
    return " ".join(cmd) if isinstance(cmd, list) else str(cmd)


def main():
    src, out = sys.argv[1], sys.argv[2]
    docs = []
    for path in sorted(glob.glob(os.path.join(src, "*.yaml"))):
        try:
            with open(path) as f:
                for d in yaml.safe_load_all(f):
                    if d is not None:
                        docs.append((os.path.basename(path), d))
            check("%s parses as YAML" % os.path.basename(path), True)
        except yaml.YAMLError as e:
            check("%s parses as YAML" % os.path.basename(path), False, str(e))
    for fname, d in docs:
        check("%s: %s has apiVersion, kind, metadata.name" % (fname, d.get("kind")),
              all(k in d for k in ("apiVersion", "kind")) and "name" in d.get("metadata", {}))
    by_kind = {}
    for _, d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    ns = [d["metadata"]["name"] for d in by_kind.get("Namespace", [])]
    ds = by_kind.get("DaemonSet", [None])[0]
    cms = by_kind.get("ConfigMap", [])
    trainers = by_kind.get("Job", []) + by_kind.get("Pod", [])
    if not (check("a DaemonSet, a ConfigMap and a trainer (Job or Pod) are there",
                  ds is not None and cms and trainers)):
        return

    # --- the DaemonSet ------------------------------------------------------
    dsns = ds["metadata"].get("namespace", "default")
    check("DaemonSet's namespace (%s) is declared, allows privileged pods" % dsns,
          any(d["metadata"]["name"] == dsns and d["metadata"].get("labels", {}).get(
              "pod-security.kubernetes.io/enforce") == "privileged"
              for d in by_kind.get("Namespace", [])) or dsns == "default")
    spec = pod_spec(ds)
    check_pod_fields("DaemonSet", spec)
    sel = ds["spec"]["selector"]["matchLabels"]
    labels = ds["spec"]["template"]["metadata"]["labels"]
    check("DaemonSet: the selector matches the template's labels",
          all(labels.get(k) == v for k, v in sel.items()))
    vols = {v["name"]: v for v in spec["volumes"]}
    c = [c for c in spec["containers"] if "shardfs" in shell_text(c.get("command", []))]
    if not check("DaemonSet: a container runs shardfs", len(c) == 1):
        return
    c = c[0]
    cmd = c["command"]
    check("DaemonSet: command is shardfs mount /etc/shardfs/dataset.conf -f (%s)" % shell_text(cmd),
          cmd == ["shardfs", "mount", "/etc/shardfs/dataset.conf", "-f"])
    check("DaemonSet: the shardfs container is privileged",
          c.get("securityContext", {}).get("privileged") is True)
    for ic in spec.get("initContainers", []) + spec["containers"]:
        if any(m.get("mountPropagation") == "Bidirectional" for m in ic.get("volumeMounts", [])):
            check("DaemonSet: %s (Bidirectional) is privileged, as Kubernetes requires" % ic["name"],
                  ic.get("securityContext", {}).get("privileged") is True)
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    fuse = mounts.get("/dev/fuse")
    check("DaemonSet: /dev/fuse is a hostPath of type CharDevice",
          fuse is not None and vols[fuse["name"]].get("hostPath", {}) ==
          {"path": "/dev/fuse", "type": "CharDevice"})
    res = c.get("resources", {})
    check("DaemonSet: resources have requests (cpu, memory) and a memory limit",
          {"cpu", "memory"} <= set(res.get("requests", {})) and "memory" in res.get("limits", {}))

    # The config in the ConfigMap the DaemonSet mounts.
    cfgm = mounts.get("/etc/shardfs")
    cmname = vols.get(cfgm["name"], {}).get("configMap", {}).get("name") if cfgm else None
    cm = [m for m in cms if m["metadata"]["name"] == cmname and
          m["metadata"].get("namespace", "default") == dsns]
    if not check("DaemonSet: /etc/shardfs is the ConfigMap %s of its namespace, read-only" % cmname,
                 len(cm) == 1 and cfgm.get("readOnly") is True):
        return
    text = cm[0]["data"].get("dataset.conf")
    if not check("ConfigMap: has dataset.conf", text is not None):
        return
    with open(os.path.join(out, "dataset.conf"), "w") as f:
        f.write(text)
    ini = configparser.ConfigParser(inline_comment_prefixes=None, comment_prefixes=(";", "#"))
    ini.read_string(text)
    mpath = ini.get("mount", "path", fallback="")
    cdir = ini.get("cache", "dir", fallback="")
    with open(os.path.join(out, "mount_path"), "w") as f:
        f.write(mpath)

    def under(path, m):
        p = m["mountPath"].rstrip("/") + "/"
        return path.startswith(p)

    cache = mounts.get(cdir)
    check("DaemonSet: the config's cache dir %s is a hostPath DirectoryOrCreate" % cdir,
          cache is not None and vols[cache["name"]].get("hostPath", {}).get("type") == "DirectoryOrCreate")
    mv = [m for m in c["volumeMounts"] if mpath and under(mpath, m)]
    ok = len(mv) == 1 and mv[0].get("mountPropagation") == "Bidirectional" and \
        vols[mv[0]["name"]].get("hostPath", {}).get("type") == "DirectoryOrCreate"
    check("DaemonSet: the config's mount path %s lies in a hostPath DirectoryOrCreate volume with "
          "mountPropagation: Bidirectional" % mpath, ok)
    if not ok:
        return
    mvol = mv[0]
    host_mnt = vols[mvol["name"]]["hostPath"]["path"].rstrip("/") + mpath[len(mvol["mountPath"].rstrip("/")):]

    pre = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command")
    pre_text = shell_text(pre or [])
    check("DaemonSet: a preStop exec hook unmounts the config's mount path (%s)" % pre_text,
          bool(pre) and re.search(r"(fusermount3? -u|umount|shardfs unmount) %s\b" % re.escape(mpath),
                                  pre_text) is not None)
    # A clean unmount, lazy only if that fails (a trainer holds files).
    check("DaemonSet: the preStop hook unmounts cleanly first, lazily only as the fallback (%s)" % pre_text,
          re.search(r"^(/bin/sh -c )?shardfs unmount %s \|\| shardfs unmount --lazy %s$"
                    % (re.escape(mpath), re.escape(mpath)), pre_text) is not None)
    # The init container runs on every pod start, also over a live mount
    # (another daemon's): it may clear only a dead one.
    inits = [ic for ic in spec.get("initContainers", []) if mpath in shell_text(ic.get("command", []))]
    init = inits[0].get("command") if len(inits) == 1 else None
    init_text = shell_text(init or [])
    check("DaemonSet: the init container clears only a dead mount: shardfs unmount --stale-only %s (%s)"
          % (mpath, init_text),
          bool(init) and re.search(r"shardfs unmount --stale-only %s\b" % re.escape(mpath), init_text)
          is not None and re.search(r"fusermount3? -u|umount|--lazy|-z\b", init_text) is None)
    with open(os.path.join(out, "init.json"), "w") as f:
        json.dump(init or [], f)
    probe = c.get("readinessProbe", {}).get("exec", {}).get("command")
    check("DaemonSet: the readiness probe asks the mount (%s)" % shell_text(probe or []),
          bool(probe) and mpath in shell_text(probe))
    with open(os.path.join(out, "ready.json"), "w") as f:
        json.dump(probe or [], f)
    with open(os.path.join(out, "prestop.json"), "w") as f:
        json.dump(pre or [], f)
    check("DaemonSet: updateStrategy OnDelete (a rolled pod unmounts under trainers)",
          ds["spec"].get("updateStrategy", {}).get("type") == "OnDelete")
    for taint in GPU_TAINTS:
        check("DaemonSet: runs on GPU nodes tainted %s%s:%s" % (
            taint["key"], "=" + taint["value"] if taint["value"] else "", taint["effect"]),
            tolerated(spec, taint), "no toleration matches (tolerations: %s)"
            % json.dumps(spec.get("tolerations", [])))

    # --- the trainer ----------------------------------------------------------
    for t in trainers:
        tname = "%s %s" % (t["kind"], t["metadata"]["name"])
        tspec = pod_spec(t)
        check_pod_fields(tname, tspec)
        tvols = {v["name"]: v for v in tspec["volumes"]}
        for tc in tspec.get("initContainers", []) + tspec["containers"]:
            tm = [m for m in tc.get("volumeMounts", [])
                  if tvols[m["name"]].get("hostPath", {}).get("path", "").rstrip("/")
                  == vols[mvol["name"]]["hostPath"]["path"].rstrip("/")]
            good = len(tm) == 1 and tm[0].get("mountPropagation") == "HostToContainer" and \
                tm[0].get("readOnly") is True
            check("%s/%s: the DaemonSet's host path, read-only, mountPropagation: HostToContainer"
                  % (tname, tc["name"]), good)
            if good:
                inside = tm[0]["mountPath"].rstrip("/") + host_mnt[len(
                    vols[mvol["name"]]["hostPath"]["path"].rstrip("/")):]
                if tc in tspec["containers"]:
                    text = shell_text(tc.get("command", []))
                    check("%s/%s reads %s/rank-R in the order of .shardfs/rank-R.order"
                          % (tname, tc["name"], inside),
                          inside in text and "rank-" in text and ".order" in text and
                          "RANK" in text)
                    # test_kubernetes.sh runs it on a real mount.
                    with open(os.path.join(out, "trainer.json"), "w") as f:
                        json.dump(tc.get("command", []), f)
                    with open(os.path.join(out, "trainer_root"), "w") as f:
                        f.write(inside)
                    env = {e["name"]: e for e in tc.get("env", [])}
                    check("%s/%s: RANK comes from the Job's completion index" % (tname, tc["name"]),
                          "job-completion-index" in json.dumps(env.get("RANK", {})))
                else:
                    check("%s/%s waits for %s/.shardfs/plan" % (tname, tc["name"], inside),
                          "%s/.shardfs/plan" % inside in shell_text(tc.get("command", [])))
        if t["kind"] == "Job":
            check("%s: completions = the config's world_size (%s)" % (tname, ini.get("shard", "world_size")),
                  str(t["spec"].get("completions")) == ini.get("shard", "world_size") and
                  t["spec"].get("completionMode") == "Indexed")
        nonroot = tspec.get("securityContext", {}).get("runAsNonRoot")
        check("%s: non-root trainers need allow_other = true in the config" % tname,
              not nonroot or ini.get("mount", "allow_other", fallback="false") == "true")
        # Wherever a trainer may be scheduled, the daemon must be too: each
        # taint a trainer's toleration names (with its value and effect,
        # NoSchedule if it names none) must be one the DaemonSet tolerates.
        missed = [t for t in tspec.get("tolerations", []) if t.get("key") and not tolerated(
            spec, {"key": t["key"], "value": t.get("value", ""),
                   "effect": t.get("effect") or "NoSchedule"})]
        check("%s: the DaemonSet tolerates every taint the trainer tolerates" % tname,
              not missed, json.dumps(missed))

    # --- the image -------------------------------------------------------------
    df = os.path.join(src, "Dockerfile")
    if check("contrib/kubernetes/Dockerfile exists", os.path.exists(df)):
        check_dockerfile(df, out)


def dockerfile_stages(path):
    """[{"from": image, "name": alias, "run": [cmd], "copy": [args]}] of a
    Dockerfile: continuation lines joined, comments dropped."""
    lines, cur = [], ""
    with open(path) as f:
        for raw in f:
            s = raw.rstrip("\n")
            if not cur and s.lstrip().startswith("#"):
                continue
            if s.endswith("\\"):
                cur += s[:-1] + " "
                continue
            lines.append(cur + s)
            cur = ""
    stages = []
    for line in lines:
        w = line.split(None, 1)
        if not w:
            continue
        op, arg = w[0].upper(), (w[1] if len(w) > 1 else "")
        if op == "FROM":
            a = arg.split()
            stages.append({"from": a[0], "name": a[2] if len(a) == 3 and a[1].lower() == "as"
                           else None, "run": [], "copy": []})
        elif stages and op == "RUN":
            stages[-1]["run"].append(arg)
        elif stages and op in ("COPY", "ADD"):
            stages[-1]["copy"].append(arg.split())
    return stages


def apt_packages(stage):
    pk = []
    for run in stage["run"]:
        for m in re.finditer(r"apt-get install ([^&;|]*)", run):
            pk += [w for w in m.group(1).split() if not w.startswith("-")]
    return pk


def check_dockerfile(df, out):
    stages = dockerfile_stages(df)
    ok = check("Dockerfile: two stages, a named build stage and the runtime (%d FROM)"
               % len(stages), len(stages) == 2 and stages[0]["name"] is not None)
    check("Dockerfile: both stages are Debian 12 (%s)" % ", ".join(s["from"] for s in stages),
          all(re.match(r"debian:(12|bookworm)\b", s["from"]) for s in stages))
    if not ok:
        return
    build, run = stages
    bpk, rpk = apt_packages(build), apt_packages(run)
    with open(os.path.join(out, "docker-packages"), "w") as f:
        f.write("\n".join(rpk) + "\n")
    with open(os.path.join(out, "docker-build-packages"), "w") as f:
        f.write("\n".join(bpk) + "\n")
    srcs = []
    for c in build["copy"]:
        args = [a for a in c if not a.startswith("--")]
        if any(a.startswith("--from") for a in c) or len(args) < 2:
            srcs.append("!" + " ".join(c))
        else:
            srcs += args[:-1]
    with open(os.path.join(out, "docker-build-copies"), "w") as f:
        f.write("\n".join(srcs) + "\n")
    with open(os.path.join(out, "docker-build-run"), "w") as f:
        f.write("\n".join(r for r in build["run"] if "apt-get" not in r) + "\n")
    check("Dockerfile: the build stage compiles shardfs with make (%s)"
          % "; ".join(build["run"][1:]),
          any(re.search(r"\bmake\b.*\bbuild/shardfs\b", r) for r in build["run"]))
    check("Dockerfile: the build stage copies sources only, never a host build/ (%s)"
          % " ".join(srcs),
          srcs and not [s for s in srcs if s.startswith("!") or
                        re.match(r"(\./)?build(/|$)", s) or s in (".", "./")])
    check("Dockerfile: the build stage installs a compiler and the build tools",
          {"gcc", "libc6-dev", "make", "pkg-config"} <= set(bpk))
    ins = [c for c in run["copy"]]
    check("Dockerfile: the runtime stage copies only the binary, from the build stage (%s)"
          % "; ".join(" ".join(c) for c in ins),
          len(ins) == 1 and "--from=%s" % build["name"] in ins[0] and
          ins[0][-1] == "/usr/local/bin/shardfs")
    check("Dockerfile: the runtime stage installs fuse3 (fusermount3) and no -dev package",
          "fuse3" in rpk and not [p for p in rpk if p.endswith("-dev")])


if __name__ == "__main__":
    main()
    sys.exit(0 if all(results) else 1)
