#!/usr/bin/env python3
"""Lint of the rendered Kubernetes manifests (`kubectl kustomize base`).

Asserts what the schemas cannot: that the node DaemonSet has the privileges
and host mounts `cubicle node` needs (and keeps its workspaces across its own
restarts), that the edges run unprivileged behind a PodDisruptionBudget and
a Service, that both take their secrets from the Secret and probe the real
health endpoints.

Usage: lint.py RENDERED.yaml   (`-` for standard input)

Prints one line per failed assertion, naming the object and what is wrong,
and exits 1 if there was any; prints nothing and exits 0 otherwise. Needs
PyYAML (scripts/test-manifests runs it with its venv's Python).
"""

import sys

import yaml

NAMESPACE = "cubicle"
SECRET = "cubicle-cluster"
NODE_PORT = 7878
EDGE_PORT = 7879
NODE_LABEL = ("cubicle.dev/node", "true")
# Host path -> the hostPath types accepted for it. /dev/kvm has no type
# check, so a host without KVM still starts (jail backend); CharDevice is
# the strict alternative an overlay may choose.
HOST_PATHS = {
    "/dev/kvm": {None, "", "CharDevice"},
    "/var/lib/cubicle": {"DirectoryOrCreate", "Directory"},
    "/var/cache/cubicle": {"DirectoryOrCreate", "Directory"},
    "/sys/fs/cgroup": {"Directory"},
    "/run/cubicle": {"DirectoryOrCreate", "Directory"},
}


class Lint:
    def __init__(self):
        self.failures = []

    def fail(self, obj, message):
        self.failures.append(f"{describe(obj)}: {message}")

    def check(self, obj, condition, message):
        if not condition:
            self.fail(obj, message)
        return condition


def describe(obj):
    if obj is None:
        return "(rendered manifests)"
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    name = meta.get("name", "?")
    return f"{obj.get('kind', '?')} {ns + '/' if ns else ''}{name}"


def dig(obj, *path):
    for key in path:
        if isinstance(obj, dict):
            obj = obj.get(key)
        elif isinstance(obj, list) and isinstance(key, int) and key < len(obj):
            obj = obj[key]
        else:
            return None
    return obj


def component(obj):
    return dig(obj, "spec", "template", "metadata", "labels", "app.kubernetes.io/component")


def selects(selector, labels):
    """Whether a LabelSelector (matchLabels and matchExpressions) selects labels."""
    if not selector or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return False
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def env_of(container):
    return {e.get("name"): e for e in container.get("env") or []}


def resolve_port(container, port):
    """A probe's or Service's port (number or container port name) as a number."""
    if isinstance(port, int):
        return port
    for p in container.get("ports") or []:
        if p.get("name") == port:
            return p.get("containerPort")
    return None


def check_probe(lint, obj, container, kind, path, port):
    probe = container.get(kind)
    if not lint.check(obj, probe, f"container {container.get('name')!r} has no {kind}"):
        return
    get = probe.get("httpGet")
    if not lint.check(obj, get, f"{kind} of {container.get('name')!r} is not an httpGet"):
        return
    lint.check(
        obj,
        get.get("path") == path and resolve_port(container, get.get("port")) == port,
        f"{kind} of {container.get('name')!r} is GET {get.get('path')} on port "
        f"{get.get('port')}, not GET {path} on {port}",
    )


def check_secret_env(lint, obj, container, name, key):
    env = env_of(container).get(name)
    if not lint.check(obj, env, f"container {container.get('name')!r} does not set {name}"):
        return
    ref = dig(env, "valueFrom", "secretKeyRef") or {}
    lint.check(
        obj,
        "value" not in env and ref.get("name") == SECRET and ref.get("key") == key,
        f"{name} of {container.get('name')!r} is not from secretKeyRef {SECRET}/{key} "
        f"(got {env.get('valueFrom') or {'value': '<literal>'}})",
    )


def check_field_env(lint, obj, container, name, field):
    env = env_of(container).get(name) or {}
    lint.check(
        obj,
        dig(env, "valueFrom", "fieldRef", "fieldPath") == field,
        f"{name} of {container.get('name')!r} is not from the downward API's {field}",
    )


def check_value_env(lint, obj, container, name, value):
    got = (env_of(container).get(name) or {}).get("value")
    lint.check(obj, got == value, f"{name} of {container.get('name')!r} is {got!r}, not {value!r}")


def the_container(lint, obj, name):
    containers = dig(obj, "spec", "template", "spec", "containers") or []
    for c in containers:
        if c.get("name") == name:
            return c
    lint.fail(obj, f"no container named {name!r}")
    return None


def lint_node(lint, ds):
    pod = dig(ds, "spec", "template", "spec") or {}
    lint.check(
        ds,
        dig(ds, "spec", "updateStrategy", "type") == "OnDelete",
        "spec.updateStrategy.type is not OnDelete (a rolling update would restart "
        "every host's daemon on its own)",
    )
    lint.check(ds, pod.get("hostNetwork") is True, "spec.template.spec.hostNetwork is not true")
    lint.check(ds, pod.get("hostPID") is True, "spec.template.spec.hostPID is not true")
    lint.check(
        ds,
        pod.get("dnsPolicy") == "ClusterFirstWithHostNet",
        f"dnsPolicy is {pod.get('dnsPolicy')!r}, not ClusterFirstWithHostNet",
    )
    key, value = NODE_LABEL
    lint.check(
        ds,
        (pod.get("nodeSelector") or {}).get(key) == value,
        f"nodeSelector does not require {key}={value}",
    )
    tolerated = any(
        t.get("key") == key
        and t.get("effect") in ("NoSchedule", None, "")
        and (t.get("operator") == "Exists" or (t.get("operator") in ("Equal", None) and t.get("value") == value))
        for t in pod.get("tolerations") or []
    )
    lint.check(ds, tolerated, f"no toleration for the taint {key}={value}:NoSchedule")
    lint.check(
        ds,
        pod.get("terminationGracePeriodSeconds", 30) >= 30,
        "terminationGracePeriodSeconds is under 30",
    )
    c = the_container(lint, ds, "node")
    if c is None:
        return
    lint.check(ds, dig(c, "securityContext", "privileged") is True, "container 'node' is not privileged")
    volumes = {v.get("name"): v for v in pod.get("volumes") or []}
    mounts = c.get("volumeMounts") or []
    for path, types in HOST_PATHS.items():
        found = [
            (name, v) for name, v in volumes.items() if dig(v, "hostPath", "path") == path
        ]
        if not lint.check(ds, found, f"no hostPath volume for {path}"):
            continue
        name, volume = found[0]
        kind = dig(volume, "hostPath", "type")
        lint.check(ds, kind in types, f"hostPath {path} has type {kind!r}, not one of {sorted(map(str, types))}")
        at = [m for m in mounts if m.get("name") == name]
        if not lint.check(ds, at, f"hostPath {path} (volume {name!r}) is not mounted in 'node'"):
            continue
        for m in at:
            lint.check(
                ds,
                m.get("mountPath") == path,
                f"hostPath {path} is mounted at {m.get('mountPath')}, not at the same path",
            )
            lint.check(ds, not m.get("readOnly"), f"hostPath {path} is mounted read-only")
            lint.check(ds, not m.get("subPath"), f"hostPath {path} is mounted with a subPath")
        if path == "/var/lib/cubicle":
            lint.check(
                ds,
                all(m.get("mountPropagation") == "Bidirectional" for m in at),
                "/var/lib/cubicle is not mounted with mountPropagation Bidirectional "
                "(the workspaces' disk mounts must outlive the pod)",
            )
    check_probe(lint, ds, c, "livenessProbe", "/healthz", NODE_PORT)
    check_probe(lint, ds, c, "readinessProbe", "/readyz", NODE_PORT)
    check_secret_env(lint, ds, c, "CUBICLE_CLUSTER_URL", "cluster-url")
    env = env_of(c)
    public = env.get("CUBICLE_EDGE_PUBLIC_KEY") or {}
    lint.check(
        ds,
        dig(public, "valueFrom", "secretKeyRef") or dig(public, "valueFrom", "configMapKeyRef"),
        "CUBICLE_EDGE_PUBLIC_KEY is not from a Secret or ConfigMap",
    )
    check_field_env(lint, ds, c, "CUBICLE_NODE_NAME", "spec.nodeName")
    check_field_env(lint, ds, c, "HOST_IP", "status.hostIP")
    names = [e.get("name") for e in c.get("env") or []]
    advertise = (env.get("CUBICLE_ADVERTISE") or {}).get("value") or ""
    lint.check(
        ds,
        advertise == f"$(HOST_IP):{NODE_PORT}"
        and "HOST_IP" in names
        and names.index("HOST_IP") < names.index("CUBICLE_ADVERTISE"),
        f"CUBICLE_ADVERTISE is {advertise!r}, not $(HOST_IP):{NODE_PORT} after HOST_IP",
    )
    check_value_env(lint, ds, c, "CUBICLE_LISTEN", f"0.0.0.0:{NODE_PORT}")
    check_value_env(lint, ds, c, "CUBICLE_DATA_DIR", "/var/lib/cubicle")
    check_value_env(lint, ds, c, "CUBICLE_IMAGE_CACHE", "/var/cache/cubicle")
    lint.check(ds, (c.get("args") or [None])[0] == "node", f"container 'node' runs {c.get('args')}, not `cubicle node`")


def lint_edge(lint, dep):
    pod = dig(dep, "spec", "template", "spec") or {}
    lint.check(dep, dig(dep, "spec", "replicas") is not None and dig(dep, "spec", "replicas") >= 2, "spec.replicas is under 2")
    lint.check(dep, not pod.get("hostNetwork") and not pod.get("hostPID"), "the edge shares the host's namespaces")
    c = the_container(lint, dep, "edge")
    if c is None:
        return
    pod_sc = pod.get("securityContext") or {}
    sc = c.get("securityContext") or {}

    def effective(key):
        return sc.get(key, pod_sc.get(key))

    lint.check(dep, effective("runAsNonRoot") is True, "container 'edge' does not run as non-root")
    lint.check(dep, effective("runAsUser") not in (None, 0), "container 'edge' has no non-zero runAsUser")
    lint.check(dep, sc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation is not false")
    lint.check(dep, sc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem is not true")
    lint.check(dep, not sc.get("privileged"), "container 'edge' is privileged")
    lint.check(dep, "ALL" in (dig(sc, "capabilities", "drop") or []), "capabilities do not drop ALL")
    lint.check(dep, not dig(sc, "capabilities", "add"), "capabilities are added")
    lint.check(
        dep,
        dig(effective("seccompProfile") or {}, "type") == "RuntimeDefault",
        "seccompProfile is not RuntimeDefault",
    )
    check_probe(lint, dep, c, "livenessProbe", "/healthz", EDGE_PORT)
    check_probe(lint, dep, c, "readinessProbe", "/readyz", EDGE_PORT)
    check_secret_env(lint, dep, c, "CUBICLE_CLUSTER_URL", "cluster-url")
    check_secret_env(lint, dep, c, "CUBICLE_EDGE_KEY", "edge-key")
    check_field_env(lint, dep, c, "CUBICLE_EDGE_NAME", "metadata.name")
    check_value_env(lint, dep, c, "CUBICLE_LISTEN", f"0.0.0.0:{EDGE_PORT}")
    lint.check(dep, (c.get("args") or [None])[0] == "edge", f"container 'edge' runs {c.get('args')}, not `cubicle edge`")


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: lint.py RENDERED.yaml", file=sys.stderr)
        return 2
    text = sys.stdin.read() if argv[1] == "-" else open(argv[1], encoding="utf-8").read()
    objects = [o for o in yaml.safe_load_all(text) if o]
    lint = Lint()

    def of(kind, comp=None):
        return [o for o in objects if o.get("kind") == kind and (comp is None or component(o) == comp)]

    lint.check(None, any(o.get("metadata", {}).get("name") == NAMESPACE for o in of("Namespace")),
               f"no Namespace {NAMESPACE}")
    for o in objects:
        if o.get("kind") == "Secret":
            lint.fail(o, "a Secret is in the manifests; the operator creates it (README), none is committed")
        elif o.get("kind") != "Namespace":
            ns = dig(o, "metadata", "namespace")
            lint.check(o, ns == NAMESPACE, f"namespace is {ns!r}, not {NAMESPACE!r}")

    nodes, edges = of("DaemonSet", "node"), of("Deployment", "edge")
    if lint.check(None, len(nodes) == 1, f"{len(nodes)} DaemonSets with component=node, not 1"):
        lint_node(lint, nodes[0])
    if not lint.check(None, len(edges) == 1, f"{len(edges)} Deployments with component=edge, not 1"):
        return report(lint)
    edge = edges[0]
    lint_edge(lint, edge)
    edge_labels = dig(edge, "spec", "template", "metadata", "labels")
    lint.check(edge, selects(dig(edge, "spec", "selector"), edge_labels),
               "spec.selector does not select its own pod template")
    edge_container = next(
        (c for c in dig(edge, "spec", "template", "spec", "containers") or [] if c.get("name") == "edge"), {}
    )

    pdbs = [p for p in of("PodDisruptionBudget") if selects(dig(p, "spec", "selector"), edge_labels)]
    if lint.check(edge, pdbs, "no PodDisruptionBudget selects the edge pods"):
        for p in pdbs:
            lint.check(p, p.get("apiVersion") == "policy/v1", f"apiVersion is {p.get('apiVersion')}, not policy/v1")
            min_available = dig(p, "spec", "minAvailable")
            lint.check(
                p,
                (isinstance(min_available, int) and min_available >= 1)
                or dig(p, "spec", "maxUnavailable") is not None,
                "neither minAvailable >= 1 nor maxUnavailable is set",
            )
    for p in of("PodDisruptionBudget"):
        for node in nodes:
            lint.check(p, not selects(dig(p, "spec", "selector"), dig(node, "spec", "template", "metadata", "labels")),
                       "selects the node pods (a node's pod must be free to go in a drain)")

    services = [
        s for s in of("Service")
        if (dig(s, "spec", "selector") or None) is not None
        and selects({"matchLabels": dig(s, "spec", "selector")}, edge_labels)
    ]
    if lint.check(edge, services, "no Service selects the edge pods"):
        for s in services:
            targets = [resolve_port(edge_container, p.get("targetPort", p.get("port"))) for p in dig(s, "spec", "ports") or []]
            lint.check(s, EDGE_PORT in targets, f"no port targets {EDGE_PORT} (targets: {targets})")
    return report(lint)


def report(lint):
    for line in lint.failures:
        print(f"lint: {line}")
    return 1 if lint.failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
