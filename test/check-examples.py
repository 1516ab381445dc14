#!/usr/bin/env python3
"""check-examples.py - the files in examples/ are copied by platform engineers, so they are
checked here against the project and against what the projects they target accept,
offline (test/examples/ holds the schemas, name lists and stand-ins, with their sources):

- the PyTorchJob and the MultiNetworkPolicy against their CRDs' OpenAPI schemas (the
  Kubeflow training operator's, multi-networkpolicy's), as the API server would validate
  them; annotations and extended resources against the list of what the projects that
  define them read, on the kinds they read them from; the variables a container's
  command uses against what it is given (the operator sets none on init containers);
  mcpnet-doctor --fleet only where a node rank and count exist;
- the Slurm batch script run against stand-ins for srun and scontrol that lay tasks out as
  Slurm does (one doctor per node, no inherited task count), the prolog run in a prolog's
  environment (no node rank or count: no --fleet), both through shellcheck;
- the Dockerfile: its build stage installs what the build uses (scripts/install-deps'
  build list), its runtime stage runs `mcpnet-params --check` after the ENV lines it
  checks, and sets no NCCL_NET (which would fail every job on a host without RDMA); the
  image it builds is the one the PyTorchJob and the batch script run (Docker's and
  enroot's syntaxes compared);
- against the project: package name and paths (from `cmake --install`, or with --deb the
  .deb CPack built), tools and their flags (from the code that parses them), and every
  NCCL_*/MCPNET_* variable through `mcpnet-params --check --json`.
  check-examples.py SOURCE_DIR BUILD_DIR [--examples DIR] [--deb FILE|DIR]
--examples points at another copy (to see a broken example fail)."""
import argparse
import fnmatch
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # nothing written into the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "examples"))
try:
    import yaml
    import k8s_schema
except ImportError:
    sys.exit("check-examples: needs PyYAML to parse the Kubernetes examples: apt-get install"
             " python3-yaml (scripts/install-deps installs it)")

ap = argparse.ArgumentParser()
ap.add_argument("src")
ap.add_argument("build")
ap.add_argument("--examples")
ap.add_argument("--deb")
a = ap.parse_args()
ex = os.path.abspath(a.examples or os.path.join(a.src, "examples"))
problems = []
REF = os.path.join(HERE, "examples")
NAMES = yaml.safe_load(open(os.path.join(REF, "known-names.yaml")))
STANDINS = os.path.join(REF, "standins")


def bad(where, what):
    problems.append(f"{os.path.relpath(where, ex)}: {what}")


def read(p):
    with open(p) as f:
        return f.read()


for tool in ("shellcheck",):
    if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode != 0:
        sys.exit(f"check-examples: needs {tool} (scripts/install-deps installs it)")

# --- what the project installs, and how it names its packages ------------------------
top = read(os.path.join(a.src, "CMakeLists.txt"))
packaging = read(os.path.join(a.src, "cmake", "packaging.cmake"))
version = re.search(r"project\(mcpnet\s+VERSION\s+([0-9.]+)", top).group(1)
pkg = re.search(r'set\(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME\s+"([^"]+)"', packaging).group(1)
bench_pkg = re.search(r'set\(CPACK_DEBIAN_BENCH_PACKAGE_NAME\s+"([^"]+)"', packaging).group(1)
if a.deb and os.path.isdir(a.deb):  # the build folder package_deb built the .deb in
    found = glob.glob(os.path.join(a.deb, f"{pkg}_*.deb"))
    if len(found) != 1:
        sys.exit(f"check-examples: want one {pkg}_*.deb in {a.deb}, found {found}")
    a.deb = found[0]
if a.deb:
    lines = subprocess.run(["dpkg-deb", "--contents", a.deb], check=True, capture_output=True,
                           text=True).stdout.splitlines()
    installed = {l.split()[-1].lstrip(".") for l in lines}
    arch = subprocess.run(["dpkg-deb", "-f", a.deb, "Architecture"], check=True, capture_output=True,
                          text=True).stdout.strip()
else:
    with tempfile.TemporaryDirectory() as root:
        subprocess.run(["cmake", "--install", a.build, "--prefix", "/usr", "--component", "runtime"],
                       check=True, capture_output=True, env=dict(os.environ, DESTDIR=root))
        installed = {p[len(root):] for p in glob.glob(root + "/**", recursive=True)}
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip()
bins = {os.path.basename(p) for p in installed if p.startswith("/usr/bin/")} - {""}
plugin_paths = sorted(p for p in installed if re.fullmatch(r"/usr/lib/[^/]+/libnccl-net-mcp\.so", p))
triplets = {p.split("/")[3] for p in plugin_paths}
deb_names = {"runtime": f"{pkg}_{version}+git20260101.abcdef0_{arch}.deb",
             "bench": f"{bench_pkg}_{version}+git20260101.abcdef0_{arch}.deb",
             "dbgsym": f"{pkg}-dbgsym_{version}+git20260101.abcdef0_{arch}.ddeb"}
cmake_opts = set(re.findall(r"option\((\w+)", top))
# What the build uses: scripts/install-deps' build list (the Dockerfile's build stage).
deps = read(os.path.join(a.src, "scripts", "install-deps"))
build_pkgs = set(re.search(r"^build=\(([^)]*)\)", deps, re.M).group(1).split())

# Flags each tool accepts, from the code that parses them; the doctor's fleet variables.
doctor_main = read(os.path.join(a.src, "tools/doctor/doctor_main.c"))
flags = {
    "mcpnet-doctor": set(re.findall(r'\{"([a-z-]+)",\s*\w+_argument', doctor_main)),
    "mcpnet-params": set(re.findall(r'strcmp\(argv\[i\], "--([a-z-]+)"\)',
                                    read(os.path.join(a.src, "tools/mcpnet-params.c")))),
}
fleet_c = read(os.path.join(a.src, "tools/doctor/doctor_fleet.c"))
FLEET_NODES_VARS = re.findall(r'"(\w+)"', re.search(r"nodes_vars\[\] = \{([^}]*)\}", fleet_c).group(1))
FLEET_RANK_VARS = re.findall(r'"(\w+)"', re.search(r"rank_vars\[\] = \{([^}]*)\}", fleet_c).group(1))
FLEET_COORD_VARS = ["MCPNET_FLEET_COORDINATOR", "SLURM_JOB_NODELIST"]
real_doctor = os.path.join(os.path.abspath(a.build), "bin", "mcpnet-doctor")


def check_command(where, words):
    """words: one command line; every mcpnet-* tool in it is installed, its flags real."""
    for i, w in enumerate(words):
        tool = os.path.basename(w)
        prev = words[i - 1] if i else ""
        if not tool.startswith("mcpnet-") or (prev.startswith("-") and "=" not in prev):
            continue  # not a tool, or an option's value (logger -t mcpnet-prolog)
        if tool not in bins:
            bad(where, f"runs {tool}, which the project does not install in {pkg} (installs: {sorted(bins)})")
            continue
        for f in words[i + 1:]:
            if f in ("&&", "||", ";", "|", ")"):
                break
            m = re.match(r"--([a-z-]+)", f)
            if m and m.group(1) not in flags.get(tool, set()):
                bad(where, f"{tool} has no option --{m.group(1)}")


def check_paths(where, text):
    for t in triplets or {"x86_64-linux-gnu"}:
        text = text.replace("$(uname -m)-linux-gnu", t)
    for p in re.findall(r"(?<![\w.])(/usr/(?:lib|bin|share)/[\w./+-]+)", text):
        if "*" not in p and p not in installed:
            bad(where, f"names {p}, which the project does not install")


def shellcheck(where, script, shell):
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
        f.write(script)
        name = f.name
    try:
        r = subprocess.run(["shellcheck", "-s", shell, "-f", "gcc", name], capture_output=True, text=True)
    finally:
        os.unlink(name)
    for line in r.stdout.splitlines():
        bad(where, "shellcheck: " + line.split(":", 1)[1].strip())


# --- variables: judged by the tool the project ships ----------------------------------
params_tool = os.path.join(os.path.abspath(a.build), "tools", "mcpnet-params")
VAR = re.compile(r"\b((?:NCCL|MCPNET)_[A-Z0-9_]+)")
table = set(re.findall(r"^((?:NCCL|MCPNET)_[A-Z0-9_]+) \(", subprocess.run(
    [params_tool, "--text"], check=True, capture_output=True, text=True).stdout, re.M))
# NCCL's own variables outside the families --check judges, which the examples set: logging.
NCCL_OWN = {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"}
# Secrets: drawn per job or taken from a secret store, never a literal in a file others copy.
SECRETS = {"MCPNET_DOCTOR_TOKEN"}


def params_check(env):
    r = subprocess.run([params_tool, "--check", "--json"], env=dict(env, PATH="/usr/bin:/bin"),
                       capture_output=True, text=True)
    try:
        return r.returncode, json.loads(r.stdout)
    except ValueError:
        return r.returncode, {"findings": [{"kind": "?", "problem": True, "message": r.stdout + r.stderr}]}


def check_vars(where, pairs, text):
    named = set(VAR.findall(text))
    fam = re.compile(r"NCCL_(IB_|NET$|NET_|SOCKET_)")
    for n in sorted(named | {n for n, _ in pairs}):
        if n.startswith("NCCL_") and n not in table and n not in NCCL_OWN and not fam.match(n):
            bad(where, f"{n} is neither an mcpnet parameter nor one of NCCL's variables known here"
                       f" ({sorted(NCCL_OWN)})")
    for n, v in pairs:
        if n in SECRETS:
            if "$" not in v:
                bad(where, f"{n}={v}: a secret written into the example; draw it per job")
        elif "$" in v:
            bad(where, f"{n}={v}: give a literal value, so it can be checked")
    pairs = [(n, v) for n, v in pairs if n not in SECRETS]
    names = {n for n, _ in pairs}
    # A name only mentioned is given a neutral value: --check must know it.
    env = {n: (v if v else "1") for n, v in pairs if "$" not in v}
    env.update({n: "1" for n in named - names if n not in ("NCCL_NET", "NCCL_NET_PLUGIN")})
    if env:
        _, out = params_check(env)
        for f in out.get("findings", []):
            if f["kind"] == "unknown-name":
                bad(where, f["message"])
    set_vals = {n: v for n, v in pairs if v and "$" not in v}
    if set_vals:
        rc, out = params_check(set_vals)
        if rc != 0:
            bad(where, "mcpnet-params --check fails on " + " ".join(f"{k}={v}" for k, v in set_vals.items()) +
                ":\n  " + "\n  ".join(f["message"] for f in out.get("findings", []) if f.get("problem")))


def shell_pairs(text):
    return [(n, v.strip("'\"")) for n, v in
            re.findall(r"\b((?:NCCL|MCPNET)_[A-Z0-9_]+)=(\"[^\"]*\"|'[^']*'|[^\s;]*)", text)]


# --- image names: Docker's REGISTRY/REPO:TAG and enroot's REGISTRY#REPO:TAG ----------------
def docker_ref(ref):
    name, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "latest")
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        registry, repo = first, rest
    else:
        registry, repo = "docker.io", name
    if registry == "docker.io" and "/" not in repo:
        repo = "library/" + repo
    return (registry, repo, tag or "latest")


def enroot_ref(parsed):
    registry = parsed.get("registry") or "docker.io"
    repo = parsed["image"]
    if registry == "docker.io" and "/" not in repo:
        repo = "library/" + repo
    return (registry, repo, parsed.get("tag") or "latest")


def show(ref):
    return f"{ref[0]}/{ref[1]}:{ref[2]}"


built_image = None  # what the Dockerfile's comment builds: docker build -t REF


# --- Dockerfile ----------------------------------------------------------------------
def check_dockerfile(p):
    global built_image
    text = read(p)
    m = re.search(r"docker build\b[^\n]*?\s-t\s+(\S+)", text)
    if m:
        built_image = docker_ref(m.group(1))
    else:
        bad(p, "does not say which image it builds (docker build ... -t REGISTRY/IMAGE:TAG in its header)")
    logical = re.sub(r"\\\n", " ", text)
    steps = [l.strip() for l in logical.splitlines() if l.strip() and not l.strip().startswith("#")]
    stages, cur = [], None
    for s in steps:
        if s.upper().startswith("FROM "):
            cur = [s]
            stages.append(cur)
        elif cur is not None:
            cur.append(s)
    if len(stages) < 2 or not re.search(r"\bAS\s+build\b", stages[0][0], re.I):
        bad(p, "wants two stages, the first 'FROM ... AS build'")
        return
    build_stage, runtime = stages[0], stages[-1]
    runs = [s[4:] for s in steps if s.upper().startswith("RUN ")]
    joined = "\n".join(runs)
    for r in runs:
        shellcheck(p, "#!/bin/sh\n" + r + "\n", "sh")
    # The build stage installs what the build uses, no more and no less.
    apt = []
    for s in build_stage:
        for m2 in re.finditer(r"apt-get install((?:\s+[^&;|]+))", s):
            apt += [w for w in m2.group(1).split() if not w.startswith("-")]
    if set(apt) != build_pkgs:
        extra, missing = sorted(set(apt) - build_pkgs), sorted(build_pkgs - set(apt))
        bad(p, f"the build stage installs {sorted(apt)}; the build uses {sorted(build_pkgs)} "
               f"(scripts/install-deps' build list){': drop ' + str(extra) if extra else ''}"
               f"{': add ' + str(missing) if missing else ''}")
    if "cpack -G DEB" not in joined:
        bad(p, "does not build the package with 'cpack -G DEB'")
    for opt in re.findall(r"-D(\w+)=", joined):
        if not opt.startswith("CMAKE_") and opt not in cmake_opts:
            bad(p, f"passes -D{opt}, which is no option of the project ({sorted(cmake_opts)})")
    debs = re.findall(r"[\w./*-]*\.deb\b", joined)
    if not debs:
        bad(p, "names no .deb")
    for d in debs:
        g = os.path.basename(d)
        if not fnmatch.fnmatch(deb_names["runtime"], g):
            bad(p, f"names {d}, but CPack builds {pkg}_VERSION_ARCH.deb")
        for other in ("bench", "dbgsym"):
            if fnmatch.fnmatch(deb_names[other], g):
                bad(p, f"{d} also matches {deb_names[other]}: the image would carry the {other} package")
    if not re.search(r"apt-get install[^&]*\.deb", joined):
        bad(p, "does not apt-get install the .deb")
    if not any(re.match(r"COPY\s+--from=build\b", s, re.I) for s in runtime):
        bad(p, "the runtime stage does not COPY --from=build")
    for s in steps:
        m2 = re.match(r"COPY\s+(?!--from)(\S+)\s", s, re.I)
        if m2 and m2.group(1) != "." and not os.path.exists(os.path.join(a.src, m2.group(1))):
            bad(p, f"COPY {m2.group(1)}: no such file in the source tree (the build context)")
    # The runtime image's environment, step by step: --check must see the final one.
    env_now, checked_with, envs = {}, None, []
    for s in runtime:
        if s.upper().startswith("ENV "):
            pairs = re.findall(r"(\w+)=(\S+)", s)
            envs += pairs
            env_now.update(pairs)
        elif s.upper().startswith("RUN ") and re.search(r"\bmcpnet-params\s+--check\b", s):
            checked_with = dict(env_now)
    final = {k: v for k, v in env_now.items() if VAR.fullmatch(k)}
    if checked_with is None:
        bad(p, "the runtime stage never runs mcpnet-params --check on the environment it sets")
    else:
        unseen = sorted(k for k, v in final.items() if checked_with.get(k) != v)
        if unseen:
            bad(p, f"runs mcpnet-params --check before the ENV that sets {', '.join(unseen)}: it checks an "
                   "environment the image does not have (put the check after the ENV lines)")
    if "NCCL_NET" in env_now:
        bad(p, f"sets NCCL_NET={env_now['NCCL_NET']} in the image: every job on a host without RDMA (a "
               "single-node or CI job) would then fail at NCCL's init; set it per job where RDMA exists")
    plugin = env_now.get("NCCL_NET_PLUGIN", "")
    if not any(p2.endswith(f"/libnccl-net-{plugin}.so") for p2 in plugin_paths):
        bad(p, f"NCCL_NET_PLUGIN={plugin}: NCCL would open libnccl-net-{plugin}.so, which the package does "
               f"not install (it installs {plugin_paths})")
    for r in runs:
        for part in re.split(r"&&|;|\|\|", r):
            check_command(p, shlex.split(part))
    check_paths(p, joined)
    check_vars(p, envs + shell_pairs(joined), text)


# --- Kubernetes ------------------------------------------------------------------------
SCHEMAS = {
    "PyTorchJob": k8s_schema.load_crd(os.path.join(REF, "vendor/kubeflow-training-operator/kubeflow.org_pytorchjobs.yaml")),
}
MNP_OLD = k8s_schema.load_crd(os.path.join(REF, "vendor/multi-networkpolicy/scheme.yml"))
SCHEMAS["MultiNetworkPolicy"] = k8s_schema.multinetworkpolicy_v1_0_1(MNP_OLD)
ANNOTATIONS = {x["name"]: x for x in NAMES["annotations"]}
RESOURCES = {x["name"]: x for x in NAMES["resources"]}
SHVAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


def check_annotations(p, where, ann, kind):
    for k in ann or {}:
        known = ANNOTATIONS.get(k)
        if known is None:
            near = [n for n in ANNOTATIONS if n.rsplit("/", 1)[-1] == k.rsplit("/", 1)[-1]]
            bad(p, f"{where}: annotation {k} is not one any project the examples target reads"
                   f"{' (' + near[0] + ' is: ' + ANNOTATIONS[near[0]]['source'] + ')' if near else ''}")
        elif kind not in known["read_on"]:
            bad(p, f"{where}: annotation {k} is read on {known['on']}, not on a {kind} ({known['source']})")


def container_script(words):
    """The shell script of ["sh"|"bash", "-c", SCRIPT], else None."""
    if len(words) >= 3 and os.path.basename(words[0]) in ("sh", "bash") and words[1] == "-c":
        return words[2]
    return None


def check_fleet(p, name, words, env_names, given_by):
    if "mcpnet-doctor" not in " ".join(words) or "--fleet" not in words:
        return
    opts = set(w for w in words if w.startswith("--"))
    for what, opt, vars_ in (("node count", "--nodes", FLEET_NODES_VARS),
                             ("node rank", "--node-rank", FLEET_RANK_VARS),
                             ("address of node 0", "--coordinator", FLEET_COORD_VARS)):
        if opt not in opts and not (set(vars_) & env_names):
            bad(p, f"{name}: mcpnet-doctor --fleet cannot place itself here: no {what} (neither {opt} nor "
                   f"{', '.join(vars_)}; {given_by}); it would exit 2")


def check_k8s(p):
    text = read(p)
    try:
        docs = [d for d in yaml.safe_load_all(text) if d]
    except yaml.YAMLError as e:
        bad(p, f"is not valid YAML: {e}")
        return
    pairs, oob, pods, networks = [], None, [], set()
    for d in docs:
        kind = d.get("kind")
        schema = SCHEMAS.get(kind)
        if schema is None:
            bad(p, f"{kind}: no schema for this kind under test/examples/vendor (add its CRD)")
            continue
        for e in k8s_schema.validate_object(d, schema):
            bad(p, f"{kind} {(d.get('metadata') or {}).get('name')}: {e}")
        check_annotations(p, f"{kind} metadata", (d.get("metadata") or {}).get("annotations"), kind)
        if kind == "PyTorchJob":
            for role, spec in (d.get("spec") or {}).get("pytorchReplicaSpecs", {}).items():
                pods.append((role, spec["template"]))
    if not pods:
        bad(p, "holds no PyTorchJob")
    op_env = NAMES["pytorchjob_env"]
    for role, t in pods:
        ann = (t.get("metadata") or {}).get("annotations") or {}
        check_annotations(p, f"{role} pod template", ann, "Pod")
        networks |= {n.strip().split("/")[-1].split("@")[0] for n in
                     str(ann.get("k8s.v1.cni.cncf.io/networks", "")).split(",") if n.strip()}
        spec = t["spec"]
        if not spec.get("hostNetwork") and "k8s.v1.cni.cncf.io/networks" not in ann:
            bad(p, f"{role}: no Multus annotation k8s.v1.cni.cncf.io/networks (nor hostNetwork)")
        shm_vols = {v["name"] for v in spec.get("volumes", [])
                    if (v.get("emptyDir") or {}).get("medium") == "Memory"}
        inits = spec.get("initContainers") or []
        if not any(os.path.basename((c.get("command") or [""])[0]) == "mcpnet-doctor" for c in inits):
            bad(p, f"{role}: no init container runs mcpnet-doctor")
        for kind_, cs in (("initContainers", inits), ("containers", spec.get("containers", []))):
            for c in cs:
                name = f"{role}/{c['name']}"
                if c.get("image") and built_image and docker_ref(c["image"]) != built_image:
                    bad(p, f"{name}: runs image {show(docker_ref(c['image']))}, but examples/Dockerfile builds "
                           f"{show(built_image)}")
                env_names = {e["name"] for e in c.get("env") or []} | set(op_env[kind_])
                given_by = (f"the training operator sets {', '.join(op_env[kind_]) or 'nothing'} on "
                            f"{kind_} (kubeflow/training-operator v1.9.0 envvar.go)")
                words = list(c.get("command") or []) + list(c.get("args") or [])
                script = container_script(words)
                if script is not None:
                    shellcheck(p, "#!/bin/sh\n" + script + "\n", "sh")
                    for v in sorted(set(SHVAR.findall(script)) - env_names):
                        bad(p, f"{name}: its command uses ${v}, which is not set in its environment ({given_by})")
                    for part in re.split(r"&&|;|\|\||\|", script):
                        try:
                            ws = shlex.split(part)
                        except ValueError:
                            continue
                        check_command(p, ws)
                        check_fleet(p, name, ws, env_names, given_by)
                else:
                    check_command(p, words)
                    check_fleet(p, name, words, env_names, given_by)
                caps = ((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or []
                if "IPC_LOCK" not in caps:
                    bad(p, f"{name}: no IPC_LOCK capability (memory registration needs it)")
                res = c.get("resources") or {}
                limits = res.get("limits") or {}
                for k in set(limits) | set(res.get("requests") or {}):
                    if "/" in k and k not in RESOURCES:
                        bad(p, f"{name}: requests {k}, which no device plugin of test/examples/known-names.yaml "
                               f"advertises (known: {sorted(RESOURCES)})")
                if not any(k in RESOURCES and k.startswith("rdma/") for k in limits):
                    bad(p, f"{name}: requests no RDMA resource (limits: {sorted(limits)})")
                if not any(m["mountPath"] == "/dev/shm" and m["name"] in shm_vols
                           for m in c.get("volumeMounts") or []):
                    bad(p, f"{name}: /dev/shm is not a memory emptyDir")
                for e in c.get("env") or []:
                    # A value from a Secret or the downward API reads as a reference ("$").
                    pairs.append((e["name"], str(e.get("value", "$valueFrom" if "valueFrom" in e else ""))))
                    if e["name"] == "MCPNET_OOB_PORT_RANGE":
                        oob = str(e.get("value"))
    check_vars(p, list(dict(pairs).items()), text)
    pol = [d for d in docs if d.get("kind") == "MultiNetworkPolicy"]
    for d in pol:
        ann = (d.get("metadata") or {}).get("annotations") or {}
        target = ann.get("k8s.v1.cni.cncf.io/policy-for")
        if target is None:
            bad(p, f"MultiNetworkPolicy {d['metadata'].get('name')}: no k8s.v1.cni.cncf.io/policy-for annotation: "
                   f"{ANNOTATIONS['k8s.v1.cni.cncf.io/policy-for']['source']}")
        elif not {t.strip().split("/")[-1] for t in str(target).split(",")} & networks:
            bad(p, f"MultiNetworkPolicy {d['metadata'].get('name')}: policy-for {target} names none of the pods' "
                   f"networks {sorted(networks)}")
        # Before multi-networkpolicy v1.0.1 the CRD has no endPort: the server drops it.
        old = k8s_schema.validate_object(d, MNP_OLD)
        if old and not re.search(r"multi-networkpolicy v1\.0\.1", text):
            bad(p, f"MultiNetworkPolicy {d['metadata'].get('name')}: the CRD of multi-networkpolicy before v1.0.1 "
                   f"drops what it uses ({old[0]}); say that it needs multi-networkpolicy v1.0.1 (and an "
                   "implementation that reads it), or use only what older ones accept")
    if oob and not pol:
        bad(p, "MCPNET_OOB_PORT_RANGE is set but no MultiNetworkPolicy opens it on the Multus interface")
    if oob and pol:
        lo, _, hi = oob.partition("-")
        lo, hi = int(lo), int(hi or lo)
        ok = any(pt.get("protocol", "TCP") == "TCP" and pt.get("port", 0) <= lo
                 and pt.get("endPort", pt.get("port", 0)) >= hi
                 for d in pol for rule in d["spec"].get("ingress", []) for pt in rule.get("ports", []))
        if not ok:
            bad(p, f"no MultiNetworkPolicy ingress rule opens TCP {oob} (MCPNET_OOB_PORT_RANGE)")


# --- shell scripts -----------------------------------------------------------------------
rankmap = read(os.path.join(a.src, "src/core/mcp_rankmap.c"))


def standin_run(script, env, where, path_rewrites=None):
    """Runs script under bash with the stand-ins first on PATH; returns (rc, output, records)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "log.jsonl")
        body = read(script)
        for old, new in (path_rewrites or {}).items():
            body = body.replace(old, new)
        copy = os.path.join(tmp, os.path.basename(script))
        with open(copy, "w") as f:
            f.write(body)
        full = dict(env, PATH=f"{STANDINS}:/usr/bin:/bin", STANDIN_LOG=log, STANDIN_REAL_DOCTOR=real_doctor,
                    HOME=tmp, PYTHONDONTWRITEBYTECODE="1")
        try:
            r = subprocess.run(["bash", copy], env=full, capture_output=True, text=True, timeout=120, cwd=tmp)
            rc, out = r.returncode, r.stdout + r.stderr
        except subprocess.TimeoutExpired:
            rc, out = 124, "timed out after 120 s"
        records = [json.loads(l) for l in open(log)] if os.path.exists(log) else []
    for rec in records:
        if "refused" in rec:
            bad(where, f"stand-in {rec['tool']} refused: {rec['refused']}")
    return rc, out, records


def sbatch_env(text):
    """The allocation's variables, from the script's #SBATCH lines, as sbatch sets them."""
    opts = dict(re.findall(r"^#SBATCH\s+--([\w-]+)(?:=(\S+))?", text, re.M))
    nodes = int(opts.get("nodes", "1"))
    env = {"SLURM_JOB_ID": "4242", "SLURM_JOBID": "4242", "SLURM_JOB_NUM_NODES": str(nodes),
           "SLURM_NNODES": str(nodes), "SLURM_JOB_NODELIST": f"gpu[01-{nodes:02d}]" if nodes > 1 else "gpu01",
           "SLURM_JOB_NAME": opts.get("job-name", "job"), "SLURM_CPUS_ON_NODE": "64"}
    if "ntasks-per-node" in opts:
        tpn = int(opts["ntasks-per-node"])
        env.update(SLURM_NTASKS_PER_NODE=str(tpn), SLURM_NTASKS=str(tpn * nodes), SLURM_NPROCS=str(tpn * nodes))
    elif "ntasks" in opts:
        env.update(SLURM_NTASKS=opts["ntasks"], SLURM_NPROCS=opts["ntasks"])
    return env, nodes


def check_sbatch(p, text):
    env, nodes = sbatch_env(text)
    rc, out, records = standin_run(p, env, p)
    if rc != 0:
        bad(p, f"fails when run in a {nodes}-node allocation (stand-in srun/scontrol, exit {rc}):\n  {out.strip()}")
    steps = [r for r in records if r["tool"] == "srun" and "refused" not in r]
    if not steps:
        bad(p, "runs no srun step")
    for s in steps:
        cmd = " ".join(s["command"])
        for w in s["warnings"]:
            bad(p, f"srun {' '.join(s['argv'])}: Slurm warns '{w}'")
        if "mcpnet-doctor" in s["command"][:1] or s["command"][:1] == ["mcpnet-doctor"]:
            if s["per_node"] != [1] * nodes:
                bad(p, f"the doctor step ({cmd}) runs {s['per_node']} tasks per node on {nodes} nodes: one per "
                       f"node is wanted (inside an allocation srun inherits SLURM_NTASKS={env.get('SLURM_NTASKS')}; "
                       "-N\"$SLURM_JOB_NUM_NODES\" --ntasks-per-node=1 drops it)"
                       + ("; with --fleet, several doctors would claim each node id" if "--fleet" in s["command"] else ""))
        if s.get("image_parsed") and "registry" in s["image_parsed"] and built_image:
            got = enroot_ref(s["image_parsed"])
            if got != built_image:
                bad(p, f"srun runs image {s['image']}, which pyxis/enroot read as {show(got)}; examples/Dockerfile "
                       f"builds {show(built_image)} (enroot's syntax: REGISTRY#IMAGE:TAG)")
    if not any(r["command"][:1] == ["mcpnet-doctor"] for r in steps):
        bad(p, "has no step that runs mcpnet-doctor before the job")
    if "MELLANOX_VISIBLE_DEVICES" not in text:
        bad(p, "does not mention MELLANOX_VISIBLE_DEVICES: where enroot restricts /dev, its 99-mellanox hook "
               "is what brings /dev/infiniband into the container (" +
               NAMES["runtime_env"][0]["source"].split(":")[0] + ")")


def check_prolog(p):
    env = {v: "1" for v in NAMES["slurm_prolog_env"]}
    env.update(SLURM_JOB_ID="4242", SLURM_JOBID="4242", SLURM_JOB_USER="alice", SLURM_JOB_NODELIST="gpu[01-02]",
               SLURM_JOB_NUM_NODES="2", SLURMD_NODENAME="gpu01", SLURM_SCRIPT_CONTEXT="prolog_slurmd",
               SLURM_CONF="/etc/slurm/slurm.conf")
    doctor = os.path.join(STANDINS, "mcpnet-doctor")
    rc, out, records = standin_run(p, env, p, {"/usr/bin/mcpnet-doctor": doctor})
    calls = [r for r in records if r["tool"] == "mcpnet-doctor"]
    if not calls:
        bad(p, "never runs mcpnet-doctor")
    for c in calls:
        if c.get("status", 0) != 0:
            bad(p, f"mcpnet-doctor {' '.join(c['argv'])} exits {c['status']} in a prolog's environment "
                   f"(Slurm gives a Prolog no SLURM_NODEID or SLURM_NNODES): {c.get('output', '').strip()[:300]}")
    if rc != 0:
        bad(p, f"exits {rc} on a healthy node: a failing Prolog drains the node and requeues the job")


def check_shell(p):
    text = read(p)
    r = subprocess.run(["bash", "-n", p], capture_output=True, text=True)
    if r.returncode != 0:
        bad(p, "bash -n: " + r.stderr.strip())
        return
    shellcheck(p, text, "bash")
    logical = re.sub(r"\\\n", " ", text)
    for line in logical.splitlines():
        line = line.split(" #")[0].strip()
        if line.startswith("#") or "mcpnet-" not in line:
            continue
        for part in re.split(r"&&|;|\|\||\$\(|\|", line):
            try:
                check_command(p, shlex.split(part))
            except ValueError:
                pass
    for line in logical.splitlines():  # every job step runs in the image (pyxis)
        if re.match(r"\s*srun\s", line) and "--container-image=" not in line:
            bad(p, f"srun without pyxis --container-image: {line.strip()}")
    for v in ("SLURM_LOCALID", "LOCAL_RANK"):
        if v in text and f'"{v}"' not in rankmap:
            bad(p, f"relies on {v}, which mcpnet does not read for the local rank")
    check_paths(p, text)
    check_vars(p, shell_pairs(text), text)
    if p.endswith(".sbatch"):
        check_sbatch(p, text)
    elif "prolog" in os.path.basename(p):
        check_prolog(p)


def check_python(p):
    text = read(p)
    try:
        compile(text, p, "exec")  # syntax only; writes no __pycache__ into examples/
    except SyntaxError as e:
        bad(p, f"Python syntax: {e}")
    kw = re.findall(r"\b((?:NCCL|MCPNET)_[A-Z0-9_]+)=\"([^\"{]*)\"", text)
    check_vars(p, kw, text)


files = sorted(f for f in glob.glob(ex + "/**/*", recursive=True) if not os.path.isdir(f))
order = sorted(files, key=lambda f: os.path.basename(f) != "Dockerfile")  # the image first
for p in order:
    b = os.path.basename(p)
    if b == "Dockerfile":
        check_dockerfile(p)
    elif b.endswith((".yaml", ".yml")):
        check_k8s(p)
    elif b.endswith((".sh", ".sbatch")):
        check_shell(p)
    elif b.endswith(".py"):
        check_python(p)
    elif b == "Dockerfile.dockerignore":
        ign = {l.strip() for l in read(p).splitlines() if l.strip() and not l.startswith("#")}
        for want in ("build/", ".git/"):
            if want not in ign:
                bad(p, f"does not keep {want} out of the build context")
    elif not b.endswith(".md"):
        bad(p, "no check knows this kind of file: add one to test/check-examples.py")
if not glob.glob(ex + "/Dockerfile") or len(files) < 5:
    problems.append(f"{ex}: expected the Dockerfile and the other examples, found {len(files)} files")
for m in problems:
    print("check-examples: " + m)
if problems:
    sys.exit(1)
print(f"check-examples: {len(files)} examples match the project (package {pkg}, tools {sorted(bins)}) and the "
      "schemas, names and Slurm behaviour of test/examples/")
