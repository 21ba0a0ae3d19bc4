#!/usr/bin/env python3
"""Vendors the Kubernetes OpenAPI v3 schemas `roam export --format kubernetes` is checked against.

    scripts/vendor-kubernetes-openapi.py CORE_V1_JSON APPS_V1_JSON OUT_JSON

CORE_V1_JSON and APPS_V1_JSON are Kubernetes' own `api/openapi-spec/v3/api__v1_openapi.json` and
`apis__apps__v1_openapi.json` of one release (see Tests/Fixtures/kubernetes/SOURCE.md for where
the vendored copy came from). OUT_JSON gets every schema reachable from the kinds the export
writes (ConfigMap, Deployment, StatefulSet, DaemonSet), each copied unchanged, and the sha256 of
both inputs. Nothing else is changed, so the result can be checked against the inputs again.
"""
import hashlib
import json
import sys

ROOTS = ["io.k8s.api.core.v1.ConfigMap", "io.k8s.api.apps.v1.Deployment", "io.k8s.api.apps.v1.StatefulSet",
         "io.k8s.api.apps.v1.DaemonSet"]


def main(core_path, apps_path, out_path):
    schemas, sources = {}, {}
    for path in (core_path, apps_path):
        data = open(path, "rb").read()
        sources[path.rsplit("/", 1)[-1]] = hashlib.sha256(data).hexdigest()
        schemas.update(json.loads(data)["components"]["schemas"])
    reachable = set()

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "$ref":
                    name = value.rsplit("/", 1)[-1]
                    if name not in reachable:
                        reachable.add(name)
                        walk(schemas[name])
                else:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for root in ROOTS:
        reachable.add(root)
        walk(schemas[root])
    result = {"x-roam-sources-sha256": sources, "x-roam-roots": ROOTS,
              "components": {"schemas": {name: schemas[name] for name in sorted(reachable)}}}
    with open(out_path, "w") as out:
        json.dump(result, out, indent=1, sort_keys=True)
        out.write("\n")
    print(f"{out_path}: {len(reachable)} schemas")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
