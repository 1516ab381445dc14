"""k8s_schema.py - validate a Kubernetes object against a CustomResourceDefinition's
structural OpenAPI v3 schema, the way the API server does (written from the Kubernetes
documentation of structural schemas, not copied from its code): an unknown field is an
error, as kubectl's default --validate=strict makes it (the server would prune it
silently otherwise), and so is a wrong type, a missing required field, a value outside
an enum, a pattern, an int32 range, or a duplicate key of a map-typed list. CEL rules
(x-kubernetes-validations) are not evaluated. Used by test/check-examples.py."""
import copy
import re

try:
    import yaml
    _Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
except ImportError:  # check-examples.py says how to install it
    yaml = None

INT32 = (-(2 ** 31), 2 ** 31 - 1)
INT64 = (-(2 ** 63), 2 ** 63 - 1)
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# A label or annotation key: an optional DNS subdomain prefix and a name.
QUALIFIED_NAME = re.compile(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                            r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
OBJECT_META = {"name", "generateName", "namespace", "labels", "annotations", "finalizers",
               "ownerReferences"}


def load_crd(path):
    with open(path) as f:
        docs = [d for d in yaml.load_all(f, Loader=_Loader) if d]
    crds = [d for d in docs if d.get("kind") == "CustomResourceDefinition"]
    if len(crds) != 1:
        raise ValueError(f"{path}: expected one CustomResourceDefinition, found {len(crds)}")
    return crds[0]


def _type_of(v):
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return "null" if v is None else type(v).__name__


def validate(value, schema, path, errors):
    """Appends 'path: problem' strings to errors."""
    if value is None:
        if not schema.get("nullable"):
            errors.append(f"{path}: null is not allowed here")
        return
    if schema.get("x-kubernetes-int-or-string"):
        if _type_of(value) not in ("integer", "string"):
            errors.append(f"{path}: wants an integer or a string, got {_type_of(value)}")
        elif isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: '{value}' does not match {schema['pattern']}")
        return
    if "anyOf" in schema and "type" not in schema:
        if not any(_accepts(value, alt) for alt in schema["anyOf"]):
            errors.append(f"{path}: matches none of {[a.get('type') for a in schema['anyOf']]}")
        return
    want = schema.get("type")
    got = _type_of(value)
    if want is None:
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return
        errors.append(f"{path}: the schema gives no type here and keeps no unknown fields")
        return
    if want == "number" and got == "integer":
        got = "number"
    if got != want:
        errors.append(f"{path}: wants {want}, got {got} ({value!r})")
        return
    if want == "object":
        _object(value, schema, path, errors)
    elif want == "array":
        items = schema.get("items", {})
        for i, v in enumerate(value):
            validate(v, items, f"{path}[{i}]", errors)
        if schema.get("x-kubernetes-list-type") == "map":
            keys = schema.get("x-kubernetes-list-map-keys", [])
            seen = set()
            for i, v in enumerate(value):
                k = tuple(v.get(key) for key in keys) if isinstance(v, dict) else None
                if k in seen:
                    errors.append(f"{path}[{i}]: duplicate {'/'.join(keys)} {k}")
                seen.add(k)
    elif want == "string":
        if "enum" in schema and value not in schema["enum"]:
            errors.append(f"{path}: '{value}' is not one of {schema['enum']}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: '{value}' does not match {schema['pattern']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: longer than {schema['maxLength']}")
    elif want in ("integer", "number"):
        lo, hi = {"int32": INT32, "int64": INT64}.get(schema.get("format"), (None, None))
        lo = schema.get("minimum", lo)
        hi = schema.get("maximum", hi)
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            errors.append(f"{path}: {value} is outside {lo}..{hi}")
        if "enum" in schema and value not in schema["enum"]:
            errors.append(f"{path}: {value} is not one of {schema['enum']}")


def _accepts(value, schema):
    errs = []
    validate(value, schema, "", errs)
    return not errs


def _object(value, schema, path, errors):
    props = schema.get("properties")
    extra = schema.get("additionalProperties")
    for k, v in value.items():
        sub = f"{path}.{k}" if path else k
        if props is not None and k in props:
            validate(v, props[k], sub, errors)
        elif isinstance(extra, dict):
            validate(v, extra, sub, errors)
        elif extra is True or schema.get("x-kubernetes-preserve-unknown-fields"):
            continue
        elif props is not None or extra is False:
            errors.append(f"{sub}: unknown field (the API server prunes it, kubectl --validate=strict "
                          f"refuses it); known here: {sorted(props or [])}")
    for r in schema.get("required", []):
        if r not in value:
            errors.append(f"{path or '(top)'}: misses required field {r}")


def _metadata(meta, path, errors):
    if not isinstance(meta, dict):
        errors.append(f"{path}: wants an object")
        return
    for k in meta:
        if k not in OBJECT_META:
            errors.append(f"{path}.{k}: unknown ObjectMeta field (known: {sorted(OBJECT_META)})")
    name = meta.get("name")
    if name is None and "generateName" not in meta:
        errors.append(f"{path}: no name")
    elif name is not None and (not isinstance(name, str) or len(name) > 253 or not DNS1123_SUBDOMAIN.match(name)):
        errors.append(f"{path}.name: '{name}' is not a DNS-1123 subdomain")
    for field in ("labels", "annotations"):
        m = meta.get(field) or {}
        if not isinstance(m, dict):
            errors.append(f"{path}.{field}: wants a map of strings")
            continue
        for k, v in m.items():
            if not isinstance(k, str) or not QUALIFIED_NAME.match(k):
                errors.append(f"{path}.{field}: '{k}' is not a valid key")
            if not isinstance(v, str):
                errors.append(f"{path}.{field}.{k}: wants a string, got {_type_of(v)} ({v!r})")


def validate_object(obj, crd):
    """Errors for obj (a parsed YAML document) against crd, as the API server would give."""
    errors = []
    group = crd["spec"]["group"]
    kind = crd["spec"]["names"]["kind"]
    api = obj.get("apiVersion", "")
    served = {v["name"]: v for v in crd["spec"]["versions"] if v.get("served")}
    g, _, ver = api.rpartition("/")
    if obj.get("kind") != kind:
        errors.append(f"kind: '{obj.get('kind')}' is not {kind}")
    if g != group or ver not in served:
        errors.append(f"apiVersion: '{api}' is not served by this CRD (served: "
                      f"{[group + '/' + v for v in served]})")
        return errors
    schema = served[ver]["schema"]["openAPIV3Schema"]
    _metadata(obj.get("metadata"), "metadata", errors)
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    top = dict(schema)
    top["properties"] = {k: v for k, v in schema.get("properties", {}).items()
                         if k not in ("apiVersion", "kind", "metadata")}
    _object(body, top, "", errors)
    return errors


def multinetworkpolicy_v1_0_1(crd):
    """multi-networkpolicy v1.0.1's CRD, written down as the one change from the vendored
    one (test/examples/README.md names the sources): v1beta1's NetworkPolicyPort gains
    endPort, an int32, in ingress and egress rules."""
    crd = copy.deepcopy(crd)
    for v in crd["spec"]["versions"]:
        if v["name"] != "v1beta1":
            continue
        spec = v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        for direction in ("ingress", "egress"):
            port = spec[direction]["items"]["properties"]["ports"]["items"]["properties"]
            port.setdefault("endPort", {"type": "integer", "format": "int32"})
    return crd
