#!/usr/bin/env python3
"""check-examples.py - the files in examples/ are copied by platform engineers, so they must
not rot: this checks them against the project as built. The Kubernetes YAML parses and has
the pod pieces mcpnet needs; every NCCL_*/MCPNET_* variable an example sets is judged by
`mcpnet-params --check`; the Dockerfile's package name, paths and tools are the ones the
project installs (from `cmake --install` into a scratch root, or with --deb from the .deb
CPack built); the shell scripts pass `bash -n` and run only installed tools with flags
those tools accept.
  check-examples.py SOURCE_DIR BUILD_DIR [--examples DIR] [--deb FILE|DIR]
--examples points at another copy (to see a broken example fail)."""
import argparse, fnmatch, glob, os, re, shlex, subprocess, sys, tempfile

try:
    import yaml
except ImportError:
    sys.exit("check-examples: needs PyYAML to parse the Kubernetes examples: apt-get install"
             " python3-yaml (scripts/install-deps installs it)")

ap = argparse.ArgumentParser()
ap.add_argument("src")
ap.add_argument("build")
ap.add_argument("--examples")
ap.add_argument("--deb")
a = ap.parse_args()
ex = a.examples or os.path.join(a.src, "examples")
problems = []


def bad(where, what):
    problems.append(f"{os.path.relpath(where, ex)}: {what}")


def read(p):
    with open(p) as f:
        return f.read()


# --- what the project installs, and how it names its package --------------------------
if a.deb and os.path.isdir(a.deb):  # the build folder package_deb built the .deb in
    found = glob.glob(os.path.join(a.deb, "mcpnet_*.deb"))
    if len(found) != 1:
        sys.exit(f"check-examples: want one mcpnet_*.deb in {a.deb}, found {found}")
    a.deb = found[0]
if a.deb:
    lines = subprocess.run(["dpkg-deb", "--contents", a.deb], check=True, capture_output=True,
                           text=True).stdout.splitlines()
    installed = {l.split()[-1].lstrip(".") for l in lines}
else:
    with tempfile.TemporaryDirectory() as root:
        subprocess.run(["cmake", "--install", a.build, "--prefix", "/usr"], check=True,
                       capture_output=True, env=dict(os.environ, DESTDIR=root))
        installed = {p[len(root):] for p in glob.glob(root + "/**", recursive=True)}
bins = {os.path.basename(p) for p in installed if p.startswith("/usr/bin/")} - {""}
top = read(os.path.join(a.src, "CMakeLists.txt"))
version = re.search(r"project\(mcpnet\s+VERSION\s+([0-9.]+)", top).group(1)
pkg = re.search(r'set\(CPACK_PACKAGE_NAME\s+"([^"]+)"', top).group(1)
deb_name = os.path.basename(a.deb) if a.deb else f"{pkg}_{version}_amd64.deb"
cmake_opts = set(re.findall(r"option\((\w+)", top))

# Flags each tool accepts, from the code that parses them.
flags = {
    "mcpnet-doctor": set(re.findall(r'\{"([a-z-]+)",\s*\w+_argument',
                                    read(os.path.join(a.src, "tools/doctor/doctor_main.c")))),
    "mcpnet-params": set(re.findall(r'strcmp\(argv\[i\], "--([a-z-]+)"\)',
                                    read(os.path.join(a.src, "tools/mcpnet-params.c")))),
}


def check_command(where, words):
    """words: one command line; every mcpnet-* tool in it is installed, its flags real."""
    for i, w in enumerate(words):
        tool = os.path.basename(w)
        prev = words[i - 1] if i else ""
        if not tool.startswith("mcpnet-") or (prev.startswith("-") and "=" not in prev):
            continue  # not a tool, or an option's value (logger -t mcpnet-prolog)
        if tool not in bins:
            bad(where, f"runs {tool}, which the project does not install (installs: {sorted(bins)})")
            continue
        for f in words[i + 1:]:
            if f in ("&&", "||", ";", "|", ")"):
                break
            m = re.match(r"--([a-z-]+)", f)
            if m and m.group(1) not in flags.get(tool, set()):
                bad(where, f"{tool} has no option --{m.group(1)}")


def check_paths(where, text):
    for p in re.findall(r"(?<![\w.])(/usr/(?:lib|bin|share)/[\w./+-]+)", text):
        if "*" not in p and p not in installed:
            bad(where, f"names {p}, which the project does not install")


# --- variables: judged by the tool the project ships ----------------------------------
params_tool = os.path.join(a.build, "tools", "mcpnet-params")
VAR = re.compile(r"\b((?:NCCL|MCPNET)_[A-Z0-9_]+)")


table = set(re.findall(r"^((?:NCCL|MCPNET)_[A-Z0-9_]+) \(", subprocess.run(
    [params_tool, "--text"], check=True, capture_output=True, text=True).stdout, re.M))
# NCCL's own variables that the examples set (--check judges only mcpnet's and NCCL_IB_*):
# the plugin choice, which the doctor checks too, and NCCL's logging.
NCCL_OWN = {"NCCL_NET_PLUGIN", "NCCL_NET", "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"}


def check_vars(where, pairs, text):
    named = set(VAR.findall(text))
    for n in sorted(named | {n for n, _ in pairs}):
        if n.startswith("NCCL_") and n not in table and n not in NCCL_OWN:
            bad(where, f"{n} is neither an mcpnet parameter nor one of NCCL's variables known here"
                       f" ({sorted(NCCL_OWN)})")
    names = {n for n, _ in pairs}
    for n, v in pairs:
        if "$" in v:
            bad(where, f"{n}={v}: give a literal value, so it can be checked")
    for n in sorted(named - names):
        pairs.append((n, ""))  # only mentioned: the name alone must be one mcpnet knows
    env = {n: (v if v else "1") for n, v in pairs if "$" not in v}
    if not env:
        return
    # A name only mentioned is given a neutral value; --check must not call it unknown.
    r = subprocess.run([params_tool, "--check"], env=dict(env, PATH="/usr/bin:/bin"),
                       capture_output=True, text=True)
    out = r.stdout + r.stderr
    unknown = [l for l in out.splitlines() if "is not an mcpnet variable" in l]
    for l in unknown:
        bad(where, l.strip())
    set_vals = {n: v for n, v in pairs if v and "$" not in v}
    if set_vals:
        r2 = subprocess.run([params_tool, "--check"], env=dict(set_vals, PATH="/usr/bin:/bin"),
                            capture_output=True, text=True)
        if r2.returncode != 0:
            bad(where, "mcpnet-params --check fails on " +
                " ".join(f"{k}={v}" for k, v in set_vals.items()) + ":\n" + r2.stdout + r2.stderr)


def shell_pairs(text):
    return [(n, v.strip("'\"")) for n, v in
            re.findall(r"\b((?:NCCL|MCPNET)_[A-Z0-9_]+)=(\"[^\"]*\"|'[^']*'|[^\s;]*)", text)]


# --- Dockerfile ----------------------------------------------------------------------
def check_dockerfile(p):
    text = read(p)
    logical = re.sub(r"\\\n", " ", text)
    steps = [l.strip() for l in logical.splitlines() if l.strip() and not l.strip().startswith("#")]
    froms = [s for s in steps if s.upper().startswith("FROM ")]
    if len(froms) < 2 or not re.search(r"\bAS\s+build\b", froms[0], re.I):
        bad(p, "wants two stages, the first 'FROM ... AS build'")
    runs = [s[4:] for s in steps if s.upper().startswith("RUN ")]
    joined = "\n".join(runs)
    if "cpack -G DEB" not in joined:
        bad(p, "does not build the package with 'cpack -G DEB'")
    for opt in re.findall(r"-D(\w+)=", joined):
        if not opt.startswith("CMAKE_") and opt not in cmake_opts:
            bad(p, f"passes -D{opt}, which is no option of the project ({sorted(cmake_opts)})")
    debs = re.findall(r"[\w./*-]*\.deb\b", joined)
    if not debs:
        bad(p, "names no .deb")
    for d in debs:
        if not fnmatch.fnmatch(deb_name, os.path.basename(d)):
            bad(p, f"names {d}, but CPack builds {deb_name}")
    if not re.search(r"apt-get install[^&]*\.deb", joined):
        bad(p, "does not apt-get install the .deb")
    if not any(re.match(r"COPY\s+--from=build\b", s, re.I) for s in steps):
        bad(p, "the runtime stage does not COPY --from=build")
    for s in steps:
        m = re.match(r"COPY\s+(?!--from)(\S+)\s", s, re.I)
        if m and m.group(1) != "." and not os.path.exists(os.path.join(a.src, m.group(1))):
            bad(p, f"COPY {m.group(1)}: no such file in the source tree (the build context)")
    envs = []
    for s in steps:
        if s.upper().startswith("ENV "):
            envs += re.findall(r"(\w+)=(\S+)", s)
    envd = dict(envs)
    if envd.get("NCCL_NET") != "MCP":
        bad(p, "does not set NCCL_NET=MCP")
    plugin = envd.get("NCCL_NET_PLUGIN", "")
    lib = f"/usr/lib/x86_64-linux-gnu/libnccl-net-{plugin}.so"
    if lib not in installed:
        bad(p, f"NCCL_NET_PLUGIN={plugin}: NCCL would open libnccl-net-{plugin}.so, "
               "which the package does not install in /usr/lib/x86_64-linux-gnu")
    for r in runs:
        for part in re.split(r"&&|;|\|\|", r):
            check_command(p, shlex.split(part))
    check_paths(p, joined)
    check_vars(p, envs + shell_pairs(joined), text)


# --- Kubernetes ------------------------------------------------------------------------
def check_k8s(p):
    text = read(p)
    try:
        docs = [d for d in yaml.safe_load_all(text) if d]
    except yaml.YAMLError as e:
        bad(p, f"is not valid YAML: {e}")
        return
    pairs, oob = [], None
    pods = []
    for d in docs:
        if d.get("kind") == "PyTorchJob":
            for role, spec in d["spec"]["pytorchReplicaSpecs"].items():
                pods.append((role, spec["template"]))
        elif d.get("kind") == "Job":
            pods.append(("Job", d["spec"]["template"]))
    if not pods:
        bad(p, "holds no PyTorchJob or Job")
    for role, t in pods:
        ann = (t.get("metadata") or {}).get("annotations") or {}
        spec = t["spec"]
        if not spec.get("hostNetwork") and "k8s.v1.cni.cncf.io/networks" not in ann:
            bad(p, f"{role}: no Multus annotation k8s.v1.cni.cncf.io/networks (nor hostNetwork)")
        shm_vols = {v["name"] for v in spec.get("volumes", [])
                    if (v.get("emptyDir") or {}).get("medium") == "Memory"}
        inits = spec.get("initContainers") or []
        if not any(os.path.basename((c.get("command") or [""])[0]) == "mcpnet-doctor"
                   for c in inits):
            bad(p, f"{role}: no init container runs mcpnet-doctor")
        for c in inits + spec.get("containers", []):
            name = f"{role}/{c['name']}"
            check_command(p, list(c.get("command") or []) + list(c.get("args") or []))
            caps = ((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or []
            if "IPC_LOCK" not in caps:
                bad(p, f"{name}: no IPC_LOCK capability (memory registration needs it)")
            limits = (c.get("resources") or {}).get("limits") or {}
            if not any("rdma" in k or "sriov" in k for k in limits):
                bad(p, f"{name}: requests no RDMA resource (limits: {sorted(limits)})")
            if not any(m["mountPath"] == "/dev/shm" and m["name"] in shm_vols
                       for m in c.get("volumeMounts") or []):
                bad(p, f"{name}: /dev/shm is not a memory emptyDir")
            for e in c.get("env") or []:
                pairs.append((e["name"], str(e.get("value", ""))))
                if e["name"] == "MCPNET_OOB_PORT_RANGE":
                    oob = str(e.get("value"))
    check_vars(p, list(dict(pairs).items()), text)
    # The out-of-band range must be open on the RDMA-side interface.
    pol = [d for d in docs if d.get("kind") == "MultiNetworkPolicy"]
    if oob and not pol:
        bad(p, "MCPNET_OOB_PORT_RANGE is set but no MultiNetworkPolicy opens it on the Multus interface")
    if oob and pol:
        lo, _, hi = oob.partition("-")
        lo, hi = int(lo), int(hi or lo)
        ok = any(pt.get("protocol", "TCP") == "TCP" and pt["port"] <= lo
                 and pt.get("endPort", pt["port"]) >= hi
                 for d in pol for rule in d["spec"].get("ingress", []) for pt in rule.get("ports", []))
        if not ok:
            bad(p, f"no MultiNetworkPolicy ingress rule opens TCP {oob} (MCPNET_OOB_PORT_RANGE)")


# --- shell scripts -----------------------------------------------------------------------
rankmap = read(os.path.join(a.src, "src/core/mcp_rankmap.c"))


def check_shell(p):
    text = read(p)
    r = subprocess.run(["bash", "-n", p], capture_output=True, text=True)
    if r.returncode != 0:
        bad(p, "bash -n: " + r.stderr.strip())
        return
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


def check_python(p):
    text = read(p)
    try:
        compile(text, p, "exec")  # syntax only; writes no __pycache__ into examples/
    except SyntaxError as e:
        bad(p, f"Python syntax: {e}")
    kw = re.findall(r"\b((?:NCCL|MCPNET)_[A-Z0-9_]+)=\"([^\"{]*)\"", text)
    check_vars(p, kw, text)


seen = 0
for p in sorted(glob.glob(ex + "/**/*", recursive=True)):
    if os.path.isdir(p):
        continue
    seen += 1
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
if not glob.glob(ex + "/Dockerfile") or seen < 5:
    problems.append(f"{ex}: expected the Dockerfile and the other examples, found {seen} files")
for m in problems:
    print("check-examples: " + m)
if problems:
    sys.exit(1)
print(f"check-examples: {seen} examples match the project (package {deb_name}, tools {sorted(bins)})")
