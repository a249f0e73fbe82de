"""Conformance of the simulated Kubernetes 1.30 API server with the official Python client
(kubernetes 30.1.0): CRUD of core and resource.k8s.io/v1alpha2 kinds and of custom objects, the
status subresource, watches from every kind of resourceVersion, bookmarks, selectors, paging,
strategic/JSON/merge patches, finalizers and garbage collection, events, bindings and discovery.

Every expectation is what a real 1.30 kube-apiserver answers. Run by sim/tests/api/python_conformance.rs
against an in-process simulated cluster (DRA_SIM_KUBECONFIG, DRA_SIM_HISTORY_LIMIT)."""

import datetime
import json
import os
import time
import uuid

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

RESOURCE_GROUP = "resource.k8s.io"


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def meta(name, **kwargs):
    return client.V1ObjectMeta(name=name, **kwargs)


def config_map(name, **kwargs):
    return client.V1ConfigMap(metadata=meta(name, **kwargs), data={"k": "v"})


def pod(name, **kwargs):
    container = client.V1Container(name="c", image="busybox:1.36", command=["sleep", "1"])
    return client.V1Pod(metadata=meta(name, **kwargs), spec=client.V1PodSpec(containers=[container]))


def claim(name, **kwargs):
    spec = client.V1alpha2ResourceClaimSpec(resource_class_name="gpu")
    return client.V1alpha2ResourceClaim(metadata=meta(name, **kwargs), spec=spec)


def eventually(check, timeout=15.0, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
        except ApiException as error:
            result = None
            last = error
        else:
            last = result
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not reached in {timeout}s (last: {last!r})")
        time.sleep(0.1)


def gone(read, *args):
    try:
        read(*args)
    except ApiException as error:
        return error.status == 404
    return False


def list_rv(lister, *args, **kwargs):
    return lister(*args, **kwargs).metadata.resource_version


def events(lister, *args, stop=None, **kwargs):
    """Watch events until `stop(collected)` holds or the watch's timeout ends it."""
    collected = []
    w = watch.Watch()
    for event in w.stream(lister, *args, **kwargs):
        collected.append(event)
        if stop and stop(collected):
            w.stop()
            break
    return collected


# --- Core kinds --------------------------------------------------------------------------------


def test_namespace_lifecycle(core):
    name = unique("ns")
    created = core.create_namespace(client.V1Namespace(metadata=meta(name, labels={"suite": "conformance"})))
    assert created.status.phase == "Active"
    assert created.metadata.labels["kubernetes.io/metadata.name"] == name
    listed = core.list_namespace(label_selector="suite=conformance")
    assert name in [n.metadata.name for n in listed.items]
    core.patch_namespace(name, {"metadata": {"labels": {"extra": "yes"}}})
    assert core.read_namespace(name).metadata.labels["extra"] == "yes"
    core.delete_namespace(name)
    try:
        phase = core.read_namespace(name).status.phase
    except ApiException as error:
        # The namespace controller may already have finished the deletion.
        assert error.status == 404
    else:
        assert phase in ("Terminating", None)
    eventually(lambda: gone(core.read_namespace, name), what="namespace removal")


def test_pod_crud_with_strategic_merge_of_containers(core, ns):
    body = pod("web", labels={"app": "web"})
    # Left to no scheduler: the cluster's scheduler records `PodScheduled` in the status of the
    # pods it handles, which would change the resourceVersion between the steps below.
    body.spec.scheduler_name = "conformance-unscheduled"
    created = core.create_namespaced_pod(ns, body)
    assert created.metadata.uid and created.metadata.resource_version
    assert created.status.phase == "Pending"
    read = core.read_namespaced_pod("web", ns)
    assert read.spec.containers[0].command == ["sleep", "1"]
    patched = core.patch_namespaced_pod(
        "web", ns, {"spec": {"containers": [{"name": "c", "image": "busybox:1.37"}]}}
    )
    assert patched.spec.containers[0].image == "busybox:1.37"
    assert patched.spec.containers[0].command == ["sleep", "1"], "merged by name, not replaced"
    patched.metadata.labels["tier"] = "front"
    replaced = core.replace_namespaced_pod("web", ns, patched)
    assert replaced.metadata.labels == {"app": "web", "tier": "front"}
    stale = replaced
    stale.metadata.resource_version = created.metadata.resource_version
    with pytest.raises(ApiException) as conflict:
        core.replace_namespaced_pod("web", ns, stale)
    assert conflict.value.status == 409
    deleted = core.delete_namespaced_pod("web", ns)
    assert isinstance(deleted, client.V1Pod) and deleted.metadata.name == "web"
    assert gone(core.read_namespaced_pod, "web", ns)


def test_errors_are_api_exceptions_with_kubernetes_codes(core, ns):
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("absent", ns)
    assert missing.value.status == 404
    core.create_namespaced_config_map(ns, config_map("dup"))
    with pytest.raises(ApiException) as duplicate:
        core.create_namespaced_config_map(ns, config_map("dup"))
    assert duplicate.value.status == 409
    with pytest.raises(ApiException) as invalid:
        core.create_namespaced_config_map(ns, config_map("Not_Valid"))
    assert invalid.value.status == 422


def test_dry_run_and_pretty_are_accepted(core, ns):
    dry = core.create_namespaced_config_map(ns, config_map("dry"), dry_run="All", pretty="true")
    assert dry.metadata.name == "dry"
    assert gone(core.read_namespaced_config_map, "dry", ns)
    with pytest.raises(ApiException) as bad:
        core.create_namespaced_config_map(ns, config_map("dry"), dry_run="Some")
    assert bad.value.status == 422


def test_events_of_both_groups_share_one_store(api_client, core, ns):
    reference = client.V1ObjectReference(kind="Pod", name="web", namespace=ns, api_version="v1")
    core.create_namespaced_event(
        ns,
        client.CoreV1Event(
            metadata=meta("web.1"),
            involved_object=reference,
            reason="Tested",
            message="core event",
            type="Normal",
        ),
    )
    events_v1 = client.EventsV1Api(api_client)
    events_v1.create_namespaced_event(
        ns,
        client.EventsV1Event(
            metadata=meta("web.2"),
            event_time=datetime.datetime.now(datetime.timezone.utc),
            reporting_controller="example.com/suite",
            reporting_instance="suite-1",
            action="Test",
            reason="Tested",
            regarding=reference,
            note="events.k8s.io event",
            type="Normal",
        ),
    )
    core_list = core.list_namespaced_event(ns, field_selector="involvedObject.name=web")
    assert sorted(e.metadata.name for e in core_list.items) == ["web.1", "web.2"]
    # Read raw: an Event created through core/v1 has no eventTime, which the client's
    # EventsV1Event model refuses (as against a real API server).
    raw = json.loads(events_v1.list_namespaced_event(ns, _preload_content=False).data)
    assert raw["apiVersion"] == "events.k8s.io/v1"
    assert sorted(e["metadata"]["name"] for e in raw["items"]) == ["web.1", "web.2"]
    assert next(e for e in raw["items"] if e["metadata"]["name"] == "web.2")["note"] == "events.k8s.io event"
    assert core.list_namespaced_event(ns, field_selector="involvedObject.name=other").items == []


# --- resource.k8s.io/v1alpha2 ---------------------------------------------------------------------


def test_resource_claim_crud_and_delete_answers_the_claim(resource, ns):
    created = resource.create_namespaced_resource_claim(ns, claim("gpu", labels={"team": "a"}))
    assert created.spec.allocation_mode == "WaitForFirstConsumer"
    assert resource.read_namespaced_resource_claim("gpu", ns).metadata.uid == created.metadata.uid
    listed = resource.list_namespaced_resource_claim(ns, label_selector="team=a")
    assert [c.metadata.name for c in listed.items] == ["gpu"]
    resource.patch_namespaced_resource_claim("gpu", ns, {"metadata": {"labels": {"team": "b"}}})
    assert resource.read_namespaced_resource_claim("gpu", ns).metadata.labels == {"team": "b"}
    with pytest.raises(ApiException) as immutable:
        resource.patch_namespaced_resource_claim("gpu", ns, {"spec": {"resourceClassName": "other"}})
    assert immutable.value.status == 422
    dry = resource.delete_namespaced_resource_claim("gpu", ns, dry_run="All")
    assert isinstance(dry, client.V1alpha2ResourceClaim)
    assert resource.read_namespaced_resource_claim("gpu", ns)
    deleted = resource.delete_namespaced_resource_claim("gpu", ns)
    assert isinstance(deleted, client.V1alpha2ResourceClaim)
    assert deleted.metadata.uid == created.metadata.uid
    assert gone(resource.read_namespaced_resource_claim, "gpu", ns)


def test_resource_class_crud(resource):
    name = unique("class")
    body = client.V1alpha2ResourceClass(metadata=meta(name), driver_name="gpu.example.com")
    created = resource.create_resource_class(body)
    assert created.driver_name == "gpu.example.com"
    assert name in [c.metadata.name for c in resource.list_resource_class().items]
    resource.patch_resource_class(name, {"metadata": {"labels": {"tier": "gold"}}})
    assert resource.read_resource_class(name).metadata.labels == {"tier": "gold"}
    deleted = resource.delete_resource_class(name)
    assert isinstance(deleted, client.V1alpha2ResourceClass) and deleted.metadata.name == name
    assert gone(resource.read_resource_class, name)


def test_resource_claim_template_crud(resource, ns):
    spec = client.V1alpha2ResourceClaimTemplateSpec(
        spec=client.V1alpha2ResourceClaimSpec(resource_class_name="gpu")
    )
    body = client.V1alpha2ResourceClaimTemplate(metadata=meta("tmpl"), spec=spec)
    resource.create_namespaced_resource_claim_template(ns, body)
    read = resource.read_namespaced_resource_claim_template("tmpl", ns)
    assert read.spec.spec.resource_class_name == "gpu"
    assert len(resource.list_namespaced_resource_claim_template(ns).items) == 1
    deleted = resource.delete_namespaced_resource_claim_template("tmpl", ns)
    assert isinstance(deleted, client.V1alpha2ResourceClaimTemplate)
    assert gone(resource.read_namespaced_resource_claim_template, "tmpl", ns)


def test_pod_scheduling_context_status_subresource(resource, ns):
    spec = client.V1alpha2PodSchedulingContextSpec(selected_node="n1", potential_nodes=["n1", "n2"])
    body = client.V1alpha2PodSchedulingContext(metadata=meta("ctx"), spec=spec)
    created = resource.create_namespaced_pod_scheduling_context(ns, body)
    assert created.status is None or created.status.resource_claims is None
    status = {"status": {"resourceClaims": [{"name": "gpu", "unsuitableNodes": ["n2"]}]}}
    updated = resource.patch_namespaced_pod_scheduling_context_status("ctx", ns, status)
    assert updated.status.resource_claims[0].unsuitable_nodes == ["n2"]
    ignored = resource.patch_namespaced_pod_scheduling_context_status("ctx", ns, {"spec": {"selectedNode": "n2"}})
    assert ignored.spec.selected_node == "n1", "the status subresource leaves spec alone"
    main = resource.patch_namespaced_pod_scheduling_context(
        "ctx", ns, {"spec": {"selectedNode": "n2"}, "status": {"resourceClaims": []}}
    )
    assert main.spec.selected_node == "n2"
    assert main.status.resource_claims[0].name == "gpu", "the main resource leaves status alone"
    read_status = resource.read_namespaced_pod_scheduling_context_status("ctx", ns)
    assert read_status.status.resource_claims[0].name == "gpu"
    deleted = resource.delete_namespaced_pod_scheduling_context("ctx", ns)
    assert isinstance(deleted, client.V1alpha2PodSchedulingContext)


# --- Custom resources ------------------------------------------------------------------------------


@pytest.fixture
def widgets(api_client):
    """A namespaced CRD `widgets.conformance.example.com` with a status subresource."""
    extensions = client.ApiextensionsV1Api(api_client)
    group = "conformance.example.com"
    schema = client.V1JSONSchemaProps(type="object", x_kubernetes_preserve_unknown_fields=True)
    version = client.V1CustomResourceDefinitionVersion(
        name="v1",
        served=True,
        storage=True,
        schema=client.V1CustomResourceValidation(open_apiv3_schema=schema),
        subresources=client.V1CustomResourceSubresources(status={}),
    )
    crd = client.V1CustomResourceDefinition(
        metadata=meta(f"widgets.{group}"),
        spec=client.V1CustomResourceDefinitionSpec(
            group=group,
            names=client.V1CustomResourceDefinitionNames(plural="widgets", singular="widget", kind="Widget"),
            scope="Namespaced",
            versions=[version],
        ),
    )
    extensions.create_custom_resource_definition(crd)

    def established():
        conditions = extensions.read_custom_resource_definition(f"widgets.{group}").status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    eventually(established, what="CRD established")
    yield group
    extensions.delete_custom_resource_definition(f"widgets.{group}")


def test_custom_objects_crud_status_and_merge_patch(custom, widgets, ns):
    args = (widgets, "v1", ns, "widgets")
    body = {"apiVersion": f"{widgets}/v1", "kind": "Widget", "metadata": {"name": "w", "labels": {"size": "s"}}, "spec": {"color": "red", "shape": "round"}}
    created = custom.create_namespaced_custom_object(*args, body)
    assert created["metadata"]["generation"] == 1
    listed = custom.list_namespaced_custom_object(*args, label_selector="size=s")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["w"]
    patched = custom.patch_namespaced_custom_object(*args, "w", {"spec": {"color": "blue", "shape": None}})
    assert patched["spec"] == {"color": "blue"}, "merge patch: null removes a key"
    assert patched["metadata"]["generation"] == 2
    status = custom.patch_namespaced_custom_object_status(*args, "w", {"status": {"ready": True}})
    assert status["status"] == {"ready": True}
    assert status["metadata"]["generation"] == 2, "a status change leaves the generation"
    patched["spec"]["color"] = "green"
    patched["metadata"]["resourceVersion"] = status["metadata"]["resourceVersion"]
    replaced = custom.replace_namespaced_custom_object(*args, "w", patched)
    assert replaced["spec"]["color"] == "green" and replaced["status"] == {"ready": True}
    deleted = custom.delete_namespaced_custom_object(*args, "w")
    assert deleted["kind"] == "Status" and deleted["status"] == "Success"
    assert deleted["details"]["kind"] == "widgets"
    with pytest.raises(ApiException) as missing:
        custom.get_namespaced_custom_object(*args, "w")
    assert missing.value.status == 404


# --- Watches -----------------------------------------------------------------------------------------


def test_watch_without_resource_version_starts_with_the_current_objects(core, ns):
    core.create_namespaced_config_map(ns, config_map("before"))
    for rv in (None, "0"):
        kwargs = {"timeout_seconds": 2}
        if rv is not None:
            kwargs["resource_version"] = rv
        got = events(core.list_namespaced_config_map, ns, stop=lambda e: len(e) >= 1, **kwargs)
        assert (got[0]["type"], got[0]["object"].metadata.name) == ("ADDED", "before")


def test_watch_from_now_sees_only_later_changes(core, ns):
    core.create_namespaced_config_map(ns, config_map("old"))
    rv = list_rv(core.list_namespaced_config_map, ns)
    core.create_namespaced_config_map(ns, config_map("new"))
    got = events(core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=2, stop=lambda e: len(e) >= 1)
    assert [(e["type"], e["object"].metadata.name) for e in got] == [("ADDED", "new")]
    assert isinstance(got[0]["object"], client.V1ConfigMap)


def test_watch_from_an_old_version_replays_every_change_since(core, ns):
    rv = list_rv(core.list_namespaced_config_map, ns)
    core.create_namespaced_config_map(ns, config_map("a"))
    core.patch_namespaced_config_map("a", ns, {"data": {"k": "changed"}})
    core.delete_namespaced_config_map("a", ns)
    got = events(core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=2, stop=lambda e: len(e) >= 3)
    assert [e["type"] for e in got] == ["ADDED", "MODIFIED", "DELETED"]
    assert got[1]["object"].data == {"k": "changed"}


def test_watch_from_a_compacted_version_raises_410(core, ns):
    rv = list_rv(core.list_namespaced_config_map, ns)
    history = int(os.environ.get("DRA_SIM_HISTORY_LIMIT", "100"))
    holder = core.create_namespaced_config_map(ns, config_map("churn"))
    for i in range(history + 10):
        core.patch_namespaced_config_map(holder.metadata.name, ns, {"data": {"n": str(i)}})
    with pytest.raises(ApiException) as expired:
        events(core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=2)
    assert expired.value.status == 410
    assert "Expired" in expired.value.reason


def test_watch_bookmarks_carry_a_resource_version(core, ns):
    got = events(
        core.list_namespaced_config_map,
        ns,
        allow_watch_bookmarks=True,
        timeout_seconds=3,
        stop=lambda e: any(x["type"] == "BOOKMARK" for x in e),
    )
    bookmark = next(e for e in got if e["type"] == "BOOKMARK")
    assert bookmark["raw_object"]["metadata"]["resourceVersion"]
    assert bookmark["raw_object"]["kind"] == "ConfigMap"


def test_watch_of_resource_claims_is_typed(resource, ns):
    rv = list_rv(resource.list_namespaced_resource_claim, ns)
    resource.create_namespaced_resource_claim(ns, claim("watched"))
    got = events(resource.list_namespaced_resource_claim, ns, resource_version=rv, timeout_seconds=2, stop=lambda e: len(e) >= 1)
    assert isinstance(got[0]["object"], client.V1alpha2ResourceClaim)
    assert got[0]["object"].spec.resource_class_name == "gpu"


def test_watch_with_a_label_selector_reports_objects_leaving_it(core, ns):
    core.create_namespaced_config_map(ns, config_map("x", labels={"app": "x"}))
    rv = list_rv(core.list_namespaced_config_map, ns)
    core.patch_namespaced_config_map("x", ns, {"metadata": {"labels": {"app": "y"}}})
    got = events(core.list_namespaced_config_map, ns, resource_version=rv, label_selector="app=x", timeout_seconds=2, stop=lambda e: len(e) >= 1)
    assert [e["type"] for e in got] == ["DELETED"]


# --- Selectors, paging, patches -------------------------------------------------------------------


def test_label_and_field_selectors(core, ns):
    for name, app in (("a", "web"), ("b", "web"), ("c", "db"), ("d", None)):
        labels = {"app": app} if app else None
        core.create_namespaced_config_map(ns, config_map(name, labels=labels))

    def names(**kwargs):
        return sorted(c.metadata.name for c in core.list_namespaced_config_map(ns, **kwargs).items)

    assert names(label_selector="app=web") == ["a", "b"]
    assert names(label_selector="app!=web") == ["c", "d"]
    assert names(label_selector="app in (web,db)") == ["a", "b", "c"]
    assert names(label_selector="!app") == ["d"]
    assert names(field_selector="metadata.name=c") == ["c"]
    assert names(field_selector="metadata.name!=c", label_selector="app") == ["a", "b"]
    with pytest.raises(ApiException) as bad:
        names(field_selector="data.k=v")
    assert bad.value.status == 400
    core.create_namespaced_pod(ns, pod("p"))
    pods = core.list_pod_for_all_namespaces(field_selector=f"metadata.namespace={ns},status.phase=Pending")
    assert [p.metadata.name for p in pods.items] == ["p"]


def test_paging_with_limit_and_continue(core, ns):
    for i in range(5):
        core.create_namespaced_config_map(ns, config_map(f"page-{i}"))
    first = core.list_namespaced_config_map(ns, limit=2)
    assert len(first.items) == 2
    assert first.metadata._continue and first.metadata.remaining_item_count == 3
    seen = [c.metadata.name for c in first.items]
    token = first.metadata._continue
    while token:
        page = core.list_namespaced_config_map(ns, limit=2, _continue=token)
        assert page.metadata.resource_version == first.metadata.resource_version
        seen += [c.metadata.name for c in page.items]
        token = page.metadata._continue
    assert seen == [f"page-{i}" for i in range(5)]
    assert len(core.list_namespaced_config_map(ns, limit=0).items) == 5


def test_json_patch_and_merge_patch(api_client, core, ns):
    core.create_namespaced_config_map(ns, config_map("p", labels={"a": "1"}))
    patched = core.patch_namespaced_config_map(
        "p", ns, [{"op": "add", "path": "/data/extra", "value": "x"}, {"op": "remove", "path": "/metadata/labels/a"}]
    )
    assert patched.data == {"k": "v", "extra": "x"} and not patched.metadata.labels
    merged = api_client.call_api(
        f"/api/v1/namespaces/{ns}/configmaps/p",
        "PATCH",
        header_params={"Content-Type": "application/merge-patch+json", "Accept": "application/json"},
        body={"data": {"extra": None, "more": "y"}},
        response_type="V1ConfigMap",
        auth_settings=["BearerToken"],
        _return_http_data_only=True,
    )
    assert merged.data == {"k": "v", "more": "y"}


# --- Finalizers and garbage collection --------------------------------------------------------------


def test_finalizers_hold_a_deleted_object_until_removed(core, resource, ns):
    core.create_namespaced_config_map(ns, config_map("held", finalizers=["example.com/hold"]))
    core.delete_namespaced_config_map("held", ns)
    held = core.read_namespaced_config_map("held", ns)
    assert held.metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map("held", ns, {"metadata": {"finalizers": None}})
    assert gone(core.read_namespaced_config_map, "held", ns)

    resource.create_namespaced_resource_claim(ns, claim("held", finalizers=["example.com/hold"]))
    marked = resource.delete_namespaced_resource_claim("held", ns)
    assert isinstance(marked, client.V1alpha2ResourceClaim)
    assert marked.metadata.deletion_timestamp is not None
    resource.patch_namespaced_resource_claim("held", ns, [{"op": "remove", "path": "/metadata/finalizers"}])
    assert gone(resource.read_namespaced_resource_claim, "held", ns)


def owned_pair(core, ns, owner_name):
    owner = core.create_namespaced_config_map(ns, config_map(owner_name))
    reference = client.V1OwnerReference(api_version="v1", kind="ConfigMap", name=owner_name, uid=owner.metadata.uid)
    core.create_namespaced_config_map(ns, config_map(f"{owner_name}-dep", owner_references=[reference]))
    return f"{owner_name}-dep"


def test_background_deletion_collects_dependents(core, ns):
    dependent = owned_pair(core, ns, "bg")
    core.delete_namespaced_config_map("bg", ns)
    eventually(lambda: gone(core.read_namespaced_config_map, dependent, ns), what="dependent collected")


def test_foreground_deletion_waits_for_dependents(core, ns):
    dependent = owned_pair(core, ns, "fg")
    core.delete_namespaced_config_map("fg", ns, body=client.V1DeleteOptions(propagation_policy="Foreground"))
    eventually(lambda: gone(core.read_namespaced_config_map, dependent, ns), what="dependent collected")
    eventually(lambda: gone(core.read_namespaced_config_map, "fg", ns), what="owner removed after its dependents")


def test_orphan_deletion_keeps_dependents_without_the_reference(core, ns):
    dependent = owned_pair(core, ns, "or")
    core.delete_namespaced_config_map("or", ns, propagation_policy="Orphan")
    eventually(lambda: gone(core.read_namespaced_config_map, "or", ns), what="owner removed")
    assert not core.read_namespaced_config_map(dependent, ns).metadata.owner_references


# --- Bindings ----------------------------------------------------------------------------------------


def test_pods_are_bound_through_both_binding_endpoints(core, ns):
    target = client.V1ObjectReference(api_version="v1", kind="Node", name="node-x")
    for name, create in (
        ("legacy", lambda b: core.create_namespaced_binding(ns, b, _preload_content=False)),
        ("sub", lambda b: core.create_namespaced_pod_binding("sub", ns, b, _preload_content=False)),
    ):
        core.create_namespaced_pod(ns, pod(name))
        response = create(client.V1Binding(metadata=meta(name), target=target))
        assert response.status == 201
        assert core.read_namespaced_pod(name, ns).spec.node_name == "node-x"
        core.delete_namespaced_pod(name, ns, grace_period_seconds=0)


# --- Discovery ---------------------------------------------------------------------------------------


def test_discovery_documents(api_client):
    assert client.CoreApi(api_client).get_api_versions().versions == ["v1"]
    core_resources = {r.name: r for r in client.CoreV1Api(api_client).get_api_resources().resources}
    for name in ("pods", "pods/status", "pods/binding", "bindings", "namespaces", "configmaps", "events", "nodes"):
        assert name in core_resources, name
    assert core_resources["bindings"].verbs == ["create"]
    assert "watch" in core_resources["pods"].verbs
    groups = {g.name: g for g in client.ApisApi(api_client).get_api_versions().groups}
    assert groups[RESOURCE_GROUP].preferred_version.group_version == "resource.k8s.io/v1alpha2"
    assert "apiextensions.k8s.io" in groups
    dra = {r.name for r in client.ResourceV1alpha2Api(api_client).get_api_resources().resources}
    for name in ("resourceclaims", "resourceclaims/status", "resourceclasses", "resourceclaimtemplates",
                 "podschedulingcontexts", "podschedulingcontexts/status", "resourceslices"):
        assert name in dra, name
    version = client.VersionApi(api_client).get_code()
    assert (version.major, version.minor) == ("1", "30")
