//! The JSON field names of the k8s-pb messages the server decodes. Generated from k8s-pb's
//! sources by `generate.rs` (`UPDATE_PROTOBUF_MESSAGES=1 cargo test -p dra-sim protobuf`); do
//! not edit.

use super::json::message;

message!(api::core::v1::Namespace {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});

message!(api::core::v1::Node {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});

message!(api::core::v1::Pod {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});

message!(api::core::v1::Event {
    metadata: "metadata",
    involved_object: "involvedObject",
    reason: "reason",
    message: "message",
    source: "source",
    first_timestamp: "firstTimestamp",
    last_timestamp: "lastTimestamp",
    count: "count",
    r#type: "type",
    event_time: "eventTime",
    series: "series",
    action: "action",
    related: "related",
    reporting_component: "reportingComponent",
    reporting_instance: "reportingInstance",
});

message!(api::core::v1::ConfigMap {
    metadata: "metadata",
    immutable: "immutable",
    data: "data",
    binary_data: "binaryData",
});

message!(api::events::v1::Event {
    metadata: "metadata",
    event_time: "eventTime",
    series: "series",
    reporting_controller: "reportingController",
    reporting_instance: "reportingInstance",
    action: "action",
    reason: "reason",
    regarding: "regarding",
    related: "related",
    note: "note",
    r#type: "type",
    deprecated_source: "deprecatedSource",
    deprecated_first_timestamp: "deprecatedFirstTimestamp",
    deprecated_last_timestamp: "deprecatedLastTimestamp",
    deprecated_count: "deprecatedCount",
});

message!(api::coordination::v1::Lease {
    metadata: "metadata",
    spec: "spec",
});

message!(api::resource::v1::DeviceClass {
    metadata: "metadata",
    spec: "spec",
});

message!(api::resource::v1::ResourceClaim {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});

message!(api::resource::v1::ResourceClaimTemplate {
    metadata: "metadata",
    spec: "spec",
});

message!(api::resource::v1::ResourceSlice {
    metadata: "metadata",
    spec: "spec",
});

message!(apimachinery::pkg::apis::meta::v1::ObjectMeta {
    name: "name",
    generate_name: "generateName",
    namespace: "namespace",
    self_link: "selfLink",
    uid: "uid",
    resource_version: "resourceVersion",
    generation: "generation",
    creation_timestamp: "creationTimestamp",
    deletion_timestamp: "deletionTimestamp",
    deletion_grace_period_seconds: "deletionGracePeriodSeconds",
    labels: "labels",
    annotations: "annotations",
    owner_references: "ownerReferences",
    finalizers: "finalizers",
    managed_fields: "managedFields",
});

message!(api::core::v1::NamespaceSpec {
    finalizers: "finalizers",
});

message!(api::core::v1::NamespaceStatus {
    phase: "phase",
    conditions: "conditions",
});

message!(api::core::v1::NodeSpec {
    pod_cidr: "podCIDR",
    pod_cid_rs: "podCIDRs",
    provider_id: "providerID",
    unschedulable: "unschedulable",
    taints: "taints",
    config_source: "configSource",
    external_id: "externalID",
});

message!(api::core::v1::NodeStatus {
    capacity: "capacity",
    allocatable: "allocatable",
    phase: "phase",
    conditions: "conditions",
    addresses: "addresses",
    daemon_endpoints: "daemonEndpoints",
    node_info: "nodeInfo",
    images: "images",
    volumes_in_use: "volumesInUse",
    volumes_attached: "volumesAttached",
    config: "config",
    runtime_handlers: "runtimeHandlers",
    features: "features",
    declared_features: "declaredFeatures",
});

message!(api::core::v1::PodSpec {
    volumes: "volumes",
    init_containers: "initContainers",
    containers: "containers",
    ephemeral_containers: "ephemeralContainers",
    restart_policy: "restartPolicy",
    termination_grace_period_seconds: "terminationGracePeriodSeconds",
    active_deadline_seconds: "activeDeadlineSeconds",
    dns_policy: "dnsPolicy",
    node_selector: "nodeSelector",
    service_account_name: "serviceAccountName",
    service_account: "serviceAccount",
    automount_service_account_token: "automountServiceAccountToken",
    node_name: "nodeName",
    host_network: "hostNetwork",
    host_pid: "hostPID",
    host_ipc: "hostIPC",
    share_process_namespace: "shareProcessNamespace",
    security_context: "securityContext",
    image_pull_secrets: "imagePullSecrets",
    hostname: "hostname",
    subdomain: "subdomain",
    affinity: "affinity",
    scheduler_name: "schedulerName",
    tolerations: "tolerations",
    host_aliases: "hostAliases",
    priority_class_name: "priorityClassName",
    priority: "priority",
    dns_config: "dnsConfig",
    readiness_gates: "readinessGates",
    runtime_class_name: "runtimeClassName",
    enable_service_links: "enableServiceLinks",
    preemption_policy: "preemptionPolicy",
    overhead: "overhead",
    topology_spread_constraints: "topologySpreadConstraints",
    set_hostname_as_fqdn: "setHostnameAsFQDN",
    os: "os",
    host_users: "hostUsers",
    scheduling_gates: "schedulingGates",
    resource_claims: "resourceClaims",
    resources: "resources",
    hostname_override: "hostnameOverride",
    workload_ref: "workloadRef",
});

message!(api::core::v1::PodStatus {
    observed_generation: "observedGeneration",
    phase: "phase",
    conditions: "conditions",
    message: "message",
    reason: "reason",
    nominated_node_name: "nominatedNodeName",
    host_ip: "hostIP",
    host_ips: "hostIPs",
    pod_ip: "podIP",
    pod_ips: "podIPs",
    start_time: "startTime",
    init_container_statuses: "initContainerStatuses",
    container_statuses: "containerStatuses",
    qos_class: "qosClass",
    ephemeral_container_statuses: "ephemeralContainerStatuses",
    resize: "resize",
    resource_claim_statuses: "resourceClaimStatuses",
    extended_resource_claim_status: "extendedResourceClaimStatus",
    allocated_resources: "allocatedResources",
    resources: "resources",
});

message!(api::core::v1::ObjectReference {
    kind: "kind",
    namespace: "namespace",
    name: "name",
    uid: "uid",
    api_version: "apiVersion",
    resource_version: "resourceVersion",
    field_path: "fieldPath",
});

message!(api::core::v1::EventSource {
    component: "component",
    host: "host",
});

message!(api::core::v1::EventSeries {
    count: "count",
    last_observed_time: "lastObservedTime",
});

message!(api::events::v1::EventSeries {
    count: "count",
    last_observed_time: "lastObservedTime",
});

message!(api::coordination::v1::LeaseSpec {
    holder_identity: "holderIdentity",
    lease_duration_seconds: "leaseDurationSeconds",
    acquire_time: "acquireTime",
    renew_time: "renewTime",
    lease_transitions: "leaseTransitions",
    strategy: "strategy",
    preferred_holder: "preferredHolder",
});

message!(api::resource::v1::DeviceClassSpec {
    selectors: "selectors",
    config: "config",
    extended_resource_name: "extendedResourceName",
});

message!(api::resource::v1::ResourceClaimSpec {
    devices: "devices",
});

message!(api::resource::v1::ResourceClaimStatus {
    allocation: "allocation",
    reserved_for: "reservedFor",
    devices: "devices",
});

message!(api::resource::v1::ResourceClaimTemplateSpec {
    metadata: "metadata",
    spec: "spec",
});

message!(api::resource::v1::ResourceSliceSpec {
    driver: "driver",
    pool: "pool",
    node_name: "nodeName",
    node_selector: "nodeSelector",
    all_nodes: "allNodes",
    devices: "devices",
    per_device_node_selection: "perDeviceNodeSelection",
    shared_counters: "sharedCounters",
});

message!(apimachinery::pkg::apis::meta::v1::OwnerReference {
    api_version: "apiVersion",
    kind: "kind",
    name: "name",
    uid: "uid",
    controller: "controller",
    block_owner_deletion: "blockOwnerDeletion",
});

message!(apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry {
    manager: "manager",
    operation: "operation",
    api_version: "apiVersion",
    time: "time",
    fields_type: "fieldsType",
    fields_v1: "fieldsV1",
    subresource: "subresource",
});

message!(api::core::v1::NamespaceCondition {
    r#type: "type",
    status: "status",
    last_transition_time: "lastTransitionTime",
    reason: "reason",
    message: "message",
});

message!(api::core::v1::Taint {
    key: "key",
    value: "value",
    effect: "effect",
    time_added: "timeAdded",
});

message!(api::core::v1::NodeConfigSource {
    config_map: "configMap",
});

message!(api::core::v1::NodeCondition {
    r#type: "type",
    status: "status",
    last_heartbeat_time: "lastHeartbeatTime",
    last_transition_time: "lastTransitionTime",
    reason: "reason",
    message: "message",
});

message!(api::core::v1::NodeAddress {
    r#type: "type",
    address: "address",
});

message!(api::core::v1::NodeDaemonEndpoints {
    kubelet_endpoint: "kubeletEndpoint",
});

message!(api::core::v1::NodeSystemInfo {
    machine_id: "machineID",
    system_uuid: "systemUUID",
    boot_id: "bootID",
    kernel_version: "kernelVersion",
    os_image: "osImage",
    container_runtime_version: "containerRuntimeVersion",
    kubelet_version: "kubeletVersion",
    kube_proxy_version: "kubeProxyVersion",
    operating_system: "operatingSystem",
    architecture: "architecture",
    swap: "swap",
});

message!(api::core::v1::ContainerImage {
    names: "names",
    size_bytes: "sizeBytes",
});

message!(api::core::v1::AttachedVolume {
    name: "name",
    device_path: "devicePath",
});

message!(api::core::v1::NodeConfigStatus {
    assigned: "assigned",
    active: "active",
    last_known_good: "lastKnownGood",
    error: "error",
});

message!(api::core::v1::NodeRuntimeHandler {
    name: "name",
    features: "features",
});

message!(api::core::v1::NodeFeatures {
    supplemental_groups_policy: "supplementalGroupsPolicy",
});

message!(api::core::v1::Volume {
    name: "name",
    volume_source: "",
});

message!(api::core::v1::Container {
    name: "name",
    image: "image",
    command: "command",
    args: "args",
    working_dir: "workingDir",
    ports: "ports",
    env_from: "envFrom",
    env: "env",
    resources: "resources",
    resize_policy: "resizePolicy",
    restart_policy: "restartPolicy",
    restart_policy_rules: "restartPolicyRules",
    volume_mounts: "volumeMounts",
    volume_devices: "volumeDevices",
    liveness_probe: "livenessProbe",
    readiness_probe: "readinessProbe",
    startup_probe: "startupProbe",
    lifecycle: "lifecycle",
    termination_message_path: "terminationMessagePath",
    termination_message_policy: "terminationMessagePolicy",
    image_pull_policy: "imagePullPolicy",
    security_context: "securityContext",
    stdin: "stdin",
    stdin_once: "stdinOnce",
    tty: "tty",
});

message!(api::core::v1::EphemeralContainer {
    ephemeral_container_common: "",
    target_container_name: "targetContainerName",
});

message!(api::core::v1::PodSecurityContext {
    se_linux_options: "seLinuxOptions",
    windows_options: "windowsOptions",
    run_as_user: "runAsUser",
    run_as_group: "runAsGroup",
    run_as_non_root: "runAsNonRoot",
    supplemental_groups: "supplementalGroups",
    supplemental_groups_policy: "supplementalGroupsPolicy",
    fs_group: "fsGroup",
    sysctls: "sysctls",
    fs_group_change_policy: "fsGroupChangePolicy",
    seccomp_profile: "seccompProfile",
    app_armor_profile: "appArmorProfile",
    se_linux_change_policy: "seLinuxChangePolicy",
});

message!(api::core::v1::LocalObjectReference {
    name: "name",
});

message!(api::core::v1::Affinity {
    node_affinity: "nodeAffinity",
    pod_affinity: "podAffinity",
    pod_anti_affinity: "podAntiAffinity",
});

message!(api::core::v1::Toleration {
    key: "key",
    operator: "operator",
    value: "value",
    effect: "effect",
    toleration_seconds: "tolerationSeconds",
});

message!(api::core::v1::HostAlias {
    ip: "ip",
    hostnames: "hostnames",
});

message!(api::core::v1::PodDnsConfig {
    nameservers: "nameservers",
    searches: "searches",
    options: "options",
});

message!(api::core::v1::PodReadinessGate {
    condition_type: "conditionType",
});

message!(api::core::v1::TopologySpreadConstraint {
    max_skew: "maxSkew",
    topology_key: "topologyKey",
    when_unsatisfiable: "whenUnsatisfiable",
    label_selector: "labelSelector",
    min_domains: "minDomains",
    node_affinity_policy: "nodeAffinityPolicy",
    node_taints_policy: "nodeTaintsPolicy",
    match_label_keys: "matchLabelKeys",
});

message!(api::core::v1::PodOs {
    name: "name",
});

message!(api::core::v1::PodSchedulingGate {
    name: "name",
});

message!(api::core::v1::PodResourceClaim {
    name: "name",
    resource_claim_name: "resourceClaimName",
    resource_claim_template_name: "resourceClaimTemplateName",
});

message!(api::core::v1::ResourceRequirements {
    limits: "limits",
    requests: "requests",
    claims: "claims",
});

message!(api::core::v1::WorkloadReference {
    name: "name",
    pod_group: "podGroup",
    pod_group_replica_key: "podGroupReplicaKey",
});

message!(api::core::v1::PodCondition {
    r#type: "type",
    observed_generation: "observedGeneration",
    status: "status",
    last_probe_time: "lastProbeTime",
    last_transition_time: "lastTransitionTime",
    reason: "reason",
    message: "message",
});

message!(api::core::v1::HostIp {
    ip: "ip",
});

message!(api::core::v1::PodIp {
    ip: "ip",
});

message!(api::core::v1::ContainerStatus {
    name: "name",
    state: "state",
    last_state: "lastState",
    ready: "ready",
    restart_count: "restartCount",
    image: "image",
    image_id: "imageID",
    container_id: "containerID",
    started: "started",
    allocated_resources: "allocatedResources",
    resources: "resources",
    volume_mounts: "volumeMounts",
    user: "user",
    allocated_resources_status: "allocatedResourcesStatus",
    stop_signal: "stopSignal",
});

message!(api::core::v1::PodResourceClaimStatus {
    name: "name",
    resource_claim_name: "resourceClaimName",
});

message!(api::core::v1::PodExtendedResourceClaimStatus {
    request_mappings: "requestMappings",
    resource_claim_name: "resourceClaimName",
});

message!(api::resource::v1::DeviceSelector {
    cel: "cel",
});

message!(api::resource::v1::DeviceClassConfiguration {
    device_configuration: "",
});

message!(api::resource::v1::DeviceClaim {
    requests: "requests",
    constraints: "constraints",
    config: "config",
});

message!(api::resource::v1::AllocationResult {
    devices: "devices",
    node_selector: "nodeSelector",
    allocation_timestamp: "allocationTimestamp",
});

message!(api::resource::v1::ResourceClaimConsumerReference {
    api_group: "apiGroup",
    resource: "resource",
    name: "name",
    uid: "uid",
});

message!(api::resource::v1::AllocatedDeviceStatus {
    driver: "driver",
    pool: "pool",
    device: "device",
    share_id: "shareID",
    conditions: "conditions",
    data: "data",
    network_data: "networkData",
});

message!(api::resource::v1::ResourcePool {
    name: "name",
    generation: "generation",
    resource_slice_count: "resourceSliceCount",
});

message!(api::core::v1::NodeSelector {
    node_selector_terms: "nodeSelectorTerms",
});

message!(api::resource::v1::Device {
    name: "name",
    attributes: "attributes",
    capacity: "capacity",
    consumes_counters: "consumesCounters",
    node_name: "nodeName",
    node_selector: "nodeSelector",
    all_nodes: "allNodes",
    taints: "taints",
    binds_to_node: "bindsToNode",
    binding_conditions: "bindingConditions",
    binding_failure_conditions: "bindingFailureConditions",
    allow_multiple_allocations: "allowMultipleAllocations",
});

message!(api::resource::v1::CounterSet {
    name: "name",
    counters: "counters",
});

message!(api::core::v1::ConfigMapNodeConfigSource {
    namespace: "namespace",
    name: "name",
    uid: "uid",
    resource_version: "resourceVersion",
    kubelet_config_key: "kubeletConfigKey",
});

message!(api::core::v1::DaemonEndpoint {
    port: "Port",
});

message!(api::core::v1::NodeSwapStatus {
    capacity: "capacity",
});

message!(api::core::v1::NodeRuntimeHandlerFeatures {
    recursive_read_only_mounts: "recursiveReadOnlyMounts",
    user_namespaces: "userNamespaces",
});

message!(api::core::v1::VolumeSource {
    host_path: "hostPath",
    empty_dir: "emptyDir",
    gce_persistent_disk: "gcePersistentDisk",
    aws_elastic_block_store: "awsElasticBlockStore",
    git_repo: "gitRepo",
    secret: "secret",
    nfs: "nfs",
    iscsi: "iscsi",
    glusterfs: "glusterfs",
    persistent_volume_claim: "persistentVolumeClaim",
    rbd: "rbd",
    flex_volume: "flexVolume",
    cinder: "cinder",
    cephfs: "cephfs",
    flocker: "flocker",
    downward_api: "downwardApi",
    fc: "fc",
    azure_file: "azureFile",
    config_map: "configMap",
    vsphere_volume: "vsphereVolume",
    quobyte: "quobyte",
    azure_disk: "azureDisk",
    photon_persistent_disk: "photonPersistentDisk",
    projected: "projected",
    portworx_volume: "portworxVolume",
    scale_io: "scaleIo",
    storageos: "storageos",
    csi: "csi",
    ephemeral: "ephemeral",
    image: "image",
});

message!(api::core::v1::ContainerPort {
    name: "name",
    host_port: "hostPort",
    container_port: "containerPort",
    protocol: "protocol",
    host_ip: "hostIP",
});

message!(api::core::v1::EnvFromSource {
    prefix: "prefix",
    config_map_ref: "configMapRef",
    secret_ref: "secretRef",
});

message!(api::core::v1::EnvVar {
    name: "name",
    value: "value",
    value_from: "valueFrom",
});

message!(api::core::v1::ContainerResizePolicy {
    resource_name: "resourceName",
    restart_policy: "restartPolicy",
});

message!(api::core::v1::ContainerRestartRule {
    action: "action",
    exit_codes: "exitCodes",
});

message!(api::core::v1::VolumeMount {
    name: "name",
    read_only: "readOnly",
    recursive_read_only: "recursiveReadOnly",
    mount_path: "mountPath",
    sub_path: "subPath",
    mount_propagation: "mountPropagation",
    sub_path_expr: "subPathExpr",
});

message!(api::core::v1::VolumeDevice {
    name: "name",
    device_path: "devicePath",
});

message!(api::core::v1::Probe {
    handler: "",
    initial_delay_seconds: "initialDelaySeconds",
    timeout_seconds: "timeoutSeconds",
    period_seconds: "periodSeconds",
    success_threshold: "successThreshold",
    failure_threshold: "failureThreshold",
    termination_grace_period_seconds: "terminationGracePeriodSeconds",
});

message!(api::core::v1::Lifecycle {
    post_start: "postStart",
    pre_stop: "preStop",
    stop_signal: "stopSignal",
});

message!(api::core::v1::SecurityContext {
    capabilities: "capabilities",
    privileged: "privileged",
    se_linux_options: "seLinuxOptions",
    windows_options: "windowsOptions",
    run_as_user: "runAsUser",
    run_as_group: "runAsGroup",
    run_as_non_root: "runAsNonRoot",
    read_only_root_filesystem: "readOnlyRootFilesystem",
    allow_privilege_escalation: "allowPrivilegeEscalation",
    proc_mount: "procMount",
    seccomp_profile: "seccompProfile",
    app_armor_profile: "appArmorProfile",
});

message!(api::core::v1::EphemeralContainerCommon {
    name: "name",
    image: "image",
    command: "command",
    args: "args",
    working_dir: "workingDir",
    ports: "ports",
    env_from: "envFrom",
    env: "env",
    resources: "resources",
    resize_policy: "resizePolicy",
    restart_policy: "restartPolicy",
    restart_policy_rules: "restartPolicyRules",
    volume_mounts: "volumeMounts",
    volume_devices: "volumeDevices",
    liveness_probe: "livenessProbe",
    readiness_probe: "readinessProbe",
    startup_probe: "startupProbe",
    lifecycle: "lifecycle",
    termination_message_path: "terminationMessagePath",
    termination_message_policy: "terminationMessagePolicy",
    image_pull_policy: "imagePullPolicy",
    security_context: "securityContext",
    stdin: "stdin",
    stdin_once: "stdinOnce",
    tty: "tty",
});

message!(api::core::v1::SeLinuxOptions {
    user: "user",
    role: "role",
    r#type: "type",
    level: "level",
});

message!(api::core::v1::WindowsSecurityContextOptions {
    gmsa_credential_spec_name: "gmsaCredentialSpecName",
    gmsa_credential_spec: "gmsaCredentialSpec",
    run_as_user_name: "runAsUserName",
    host_process: "hostProcess",
});

message!(api::core::v1::Sysctl {
    name: "name",
    value: "value",
});

message!(api::core::v1::SeccompProfile {
    r#type: "type",
    localhost_profile: "localhostProfile",
});

message!(api::core::v1::AppArmorProfile {
    r#type: "type",
    localhost_profile: "localhostProfile",
});

message!(api::core::v1::NodeAffinity {
    required_during_scheduling_ignored_during_execution: "requiredDuringSchedulingIgnoredDuringExecution",
    preferred_during_scheduling_ignored_during_execution: "preferredDuringSchedulingIgnoredDuringExecution",
});

message!(api::core::v1::PodAffinity {
    required_during_scheduling_ignored_during_execution: "requiredDuringSchedulingIgnoredDuringExecution",
    preferred_during_scheduling_ignored_during_execution: "preferredDuringSchedulingIgnoredDuringExecution",
});

message!(api::core::v1::PodAntiAffinity {
    required_during_scheduling_ignored_during_execution: "requiredDuringSchedulingIgnoredDuringExecution",
    preferred_during_scheduling_ignored_during_execution: "preferredDuringSchedulingIgnoredDuringExecution",
});

message!(api::core::v1::PodDnsConfigOption {
    name: "name",
    value: "value",
});

message!(apimachinery::pkg::apis::meta::v1::LabelSelector {
    match_labels: "matchLabels",
    match_expressions: "matchExpressions",
});

message!(api::core::v1::ResourceClaim {
    name: "name",
    request: "request",
});

message!(api::core::v1::ContainerState {
    waiting: "waiting",
    running: "running",
    terminated: "terminated",
});

message!(api::core::v1::VolumeMountStatus {
    name: "name",
    mount_path: "mountPath",
    read_only: "readOnly",
    recursive_read_only: "recursiveReadOnly",
});

message!(api::core::v1::ContainerUser {
    linux: "linux",
});

message!(api::core::v1::ResourceStatus {
    name: "name",
    resources: "resources",
});

message!(api::core::v1::ContainerExtendedResourceRequest {
    container_name: "containerName",
    resource_name: "resourceName",
    request_name: "requestName",
});

message!(api::resource::v1::CelDeviceSelector {
    expression: "expression",
});

message!(api::resource::v1::DeviceConfiguration {
    opaque: "opaque",
});

message!(api::resource::v1::DeviceRequest {
    name: "name",
    exactly: "exactly",
    first_available: "firstAvailable",
});

message!(api::resource::v1::DeviceConstraint {
    requests: "requests",
    match_attribute: "matchAttribute",
    distinct_attribute: "distinctAttribute",
});

message!(api::resource::v1::DeviceClaimConfiguration {
    requests: "requests",
    device_configuration: "",
});

message!(api::resource::v1::DeviceAllocationResult {
    results: "results",
    config: "config",
});

message!(apimachinery::pkg::apis::meta::v1::Condition {
    r#type: "type",
    status: "status",
    observed_generation: "observedGeneration",
    last_transition_time: "lastTransitionTime",
    reason: "reason",
    message: "message",
});

message!(api::resource::v1::NetworkDeviceData {
    interface_name: "interfaceName",
    ips: "ips",
    hardware_address: "hardwareAddress",
});

message!(api::core::v1::NodeSelectorTerm {
    match_expressions: "matchExpressions",
    match_fields: "matchFields",
});

message!(api::resource::v1::DeviceAttribute {
    int: "int",
    bool: "bool",
    string: "string",
    version: "version",
});

message!(api::resource::v1::DeviceCapacity {
    value: "value",
    request_policy: "requestPolicy",
});

message!(api::resource::v1::DeviceCounterConsumption {
    counter_set: "counterSet",
    counters: "counters",
});

message!(api::resource::v1::DeviceTaint {
    key: "key",
    value: "value",
    effect: "effect",
    time_added: "timeAdded",
});

message!(api::resource::v1::Counter {
    value: "value",
});

message!(api::core::v1::HostPathVolumeSource {
    path: "path",
    r#type: "type",
});

message!(api::core::v1::EmptyDirVolumeSource {
    medium: "medium",
    size_limit: "sizeLimit",
});

message!(api::core::v1::GcePersistentDiskVolumeSource {
    pd_name: "pdName",
    fs_type: "fsType",
    partition: "partition",
    read_only: "readOnly",
});

message!(api::core::v1::AwsElasticBlockStoreVolumeSource {
    volume_id: "volumeId",
    fs_type: "fsType",
    partition: "partition",
    read_only: "readOnly",
});

message!(api::core::v1::GitRepoVolumeSource {
    repository: "repository",
    revision: "revision",
    directory: "directory",
});

message!(api::core::v1::SecretVolumeSource {
    secret_name: "secretName",
    items: "items",
    default_mode: "defaultMode",
    optional: "optional",
});

message!(api::core::v1::NfsVolumeSource {
    server: "server",
    path: "path",
    read_only: "readOnly",
});

message!(api::core::v1::IscsiVolumeSource {
    target_portal: "targetPortal",
    iqn: "iqn",
    lun: "lun",
    iscsi_interface: "iscsiInterface",
    fs_type: "fsType",
    read_only: "readOnly",
    portals: "portals",
    chap_auth_discovery: "chapAuthDiscovery",
    chap_auth_session: "chapAuthSession",
    secret_ref: "secretRef",
    initiator_name: "initiatorName",
});

message!(api::core::v1::GlusterfsVolumeSource {
    endpoints: "endpoints",
    path: "path",
    read_only: "readOnly",
});

message!(api::core::v1::PersistentVolumeClaimVolumeSource {
    claim_name: "claimName",
    read_only: "readOnly",
});

message!(api::core::v1::RbdVolumeSource {
    monitors: "monitors",
    image: "image",
    fs_type: "fsType",
    pool: "pool",
    user: "user",
    keyring: "keyring",
    secret_ref: "secretRef",
    read_only: "readOnly",
});

message!(api::core::v1::FlexVolumeSource {
    driver: "driver",
    fs_type: "fsType",
    secret_ref: "secretRef",
    read_only: "readOnly",
    options: "options",
});

message!(api::core::v1::CinderVolumeSource {
    volume_id: "volumeID",
    fs_type: "fsType",
    read_only: "readOnly",
    secret_ref: "secretRef",
});

message!(api::core::v1::CephFsVolumeSource {
    monitors: "monitors",
    path: "path",
    user: "user",
    secret_file: "secretFile",
    secret_ref: "secretRef",
    read_only: "readOnly",
});

message!(api::core::v1::FlockerVolumeSource {
    dataset_name: "datasetName",
    dataset_uuid: "datasetUUID",
});

message!(api::core::v1::DownwardAPIVolumeSource {
    items: "items",
    default_mode: "defaultMode",
});

message!(api::core::v1::FcVolumeSource {
    target_ww_ns: "targetWwNs",
    lun: "lun",
    fs_type: "fsType",
    read_only: "readOnly",
    wwids: "wwids",
});

message!(api::core::v1::AzureFileVolumeSource {
    secret_name: "secretName",
    share_name: "shareName",
    read_only: "readOnly",
});

message!(api::core::v1::ConfigMapVolumeSource {
    local_object_reference: "",
    items: "items",
    default_mode: "defaultMode",
    optional: "optional",
});

message!(api::core::v1::VsphereVirtualDiskVolumeSource {
    volume_path: "volumePath",
    fs_type: "fsType",
    storage_policy_name: "storagePolicyName",
    storage_policy_id: "storagePolicyID",
});

message!(api::core::v1::QuobyteVolumeSource {
    registry: "registry",
    volume: "volume",
    read_only: "readOnly",
    user: "user",
    group: "group",
    tenant: "tenant",
});

message!(api::core::v1::AzureDiskVolumeSource {
    disk_name: "diskName",
    disk_uri: "diskURI",
    caching_mode: "cachingMode",
    fs_type: "fsType",
    read_only: "readOnly",
    kind: "kind",
});

message!(api::core::v1::PhotonPersistentDiskVolumeSource {
    pd_id: "pdID",
    fs_type: "fsType",
});

message!(api::core::v1::ProjectedVolumeSource {
    sources: "sources",
    default_mode: "defaultMode",
});

message!(api::core::v1::PortworxVolumeSource {
    volume_id: "volumeID",
    fs_type: "fsType",
    read_only: "readOnly",
});

message!(api::core::v1::ScaleIoVolumeSource {
    gateway: "gateway",
    system: "system",
    secret_ref: "secretRef",
    ssl_enabled: "sslEnabled",
    protection_domain: "protectionDomain",
    storage_pool: "storagePool",
    storage_mode: "storageMode",
    volume_name: "volumeName",
    fs_type: "fsType",
    read_only: "readOnly",
});

message!(api::core::v1::StorageOsVolumeSource {
    volume_name: "volumeName",
    volume_namespace: "volumeNamespace",
    fs_type: "fsType",
    read_only: "readOnly",
    secret_ref: "secretRef",
});

message!(api::core::v1::CSIVolumeSource {
    driver: "driver",
    read_only: "readOnly",
    fs_type: "fsType",
    volume_attributes: "volumeAttributes",
    node_publish_secret_ref: "nodePublishSecretRef",
});

message!(api::core::v1::EphemeralVolumeSource {
    volume_claim_template: "volumeClaimTemplate",
});

message!(api::core::v1::ImageVolumeSource {
    reference: "reference",
    pull_policy: "pullPolicy",
});

message!(api::core::v1::ConfigMapEnvSource {
    local_object_reference: "",
    optional: "optional",
});

message!(api::core::v1::SecretEnvSource {
    local_object_reference: "",
    optional: "optional",
});

message!(api::core::v1::EnvVarSource {
    field_ref: "fieldRef",
    resource_field_ref: "resourceFieldRef",
    config_map_key_ref: "configMapKeyRef",
    secret_key_ref: "secretKeyRef",
    file_key_ref: "fileKeyRef",
});

message!(api::core::v1::ContainerRestartRuleOnExitCodes {
    operator: "operator",
    values: "values",
});

message!(api::core::v1::ProbeHandler {
    exec: "exec",
    http_get: "httpGet",
    tcp_socket: "tcpSocket",
    grpc: "grpc",
});

message!(api::core::v1::LifecycleHandler {
    exec: "exec",
    http_get: "httpGet",
    tcp_socket: "tcpSocket",
    sleep: "sleep",
});

message!(api::core::v1::Capabilities {
    add: "add",
    drop: "drop",
});

message!(api::core::v1::PreferredSchedulingTerm {
    weight: "weight",
    preference: "preference",
});

message!(api::core::v1::PodAffinityTerm {
    label_selector: "labelSelector",
    namespaces: "namespaces",
    topology_key: "topologyKey",
    namespace_selector: "namespaceSelector",
    match_label_keys: "matchLabelKeys",
    mismatch_label_keys: "mismatchLabelKeys",
});

message!(api::core::v1::WeightedPodAffinityTerm {
    weight: "weight",
    pod_affinity_term: "podAffinityTerm",
});

message!(apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
    key: "key",
    operator: "operator",
    values: "values",
});

message!(api::core::v1::ContainerStateWaiting {
    reason: "reason",
    message: "message",
});

message!(api::core::v1::ContainerStateRunning {
    started_at: "startedAt",
});

message!(api::core::v1::ContainerStateTerminated {
    exit_code: "exitCode",
    signal: "signal",
    reason: "reason",
    message: "message",
    started_at: "startedAt",
    finished_at: "finishedAt",
    container_id: "containerID",
});

message!(api::core::v1::LinuxContainerUser {
    uid: "uid",
    gid: "gid",
    supplemental_groups: "supplementalGroups",
});

message!(api::core::v1::ResourceHealth {
    resource_id: "resourceId",
    health: "health",
});

message!(api::resource::v1::OpaqueDeviceConfiguration {
    driver: "driver",
    parameters: "parameters",
});

message!(api::resource::v1::ExactDeviceRequest {
    device_class_name: "deviceClassName",
    selectors: "selectors",
    allocation_mode: "allocationMode",
    count: "count",
    admin_access: "adminAccess",
    tolerations: "tolerations",
    capacity: "capacity",
});

message!(api::resource::v1::DeviceSubRequest {
    name: "name",
    device_class_name: "deviceClassName",
    selectors: "selectors",
    allocation_mode: "allocationMode",
    count: "count",
    tolerations: "tolerations",
    capacity: "capacity",
});

message!(api::resource::v1::DeviceRequestAllocationResult {
    request: "request",
    driver: "driver",
    pool: "pool",
    device: "device",
    admin_access: "adminAccess",
    tolerations: "tolerations",
    binding_conditions: "bindingConditions",
    binding_failure_conditions: "bindingFailureConditions",
    share_id: "shareID",
    consumed_capacity: "consumedCapacity",
});

message!(api::resource::v1::DeviceAllocationConfiguration {
    source: "source",
    requests: "requests",
    device_configuration: "",
});

message!(api::core::v1::NodeSelectorRequirement {
    key: "key",
    operator: "operator",
    values: "values",
});

message!(api::resource::v1::CapacityRequestPolicy {
    default: "default",
    valid_values: "validValues",
    valid_range: "validRange",
});

message!(api::core::v1::KeyToPath {
    key: "key",
    path: "path",
    mode: "mode",
});

message!(api::core::v1::DownwardAPIVolumeFile {
    path: "path",
    field_ref: "fieldRef",
    resource_field_ref: "resourceFieldRef",
    mode: "mode",
});

message!(api::core::v1::VolumeProjection {
    secret: "secret",
    downward_api: "downwardAPI",
    config_map: "configMap",
    service_account_token: "serviceAccountToken",
    cluster_trust_bundle: "clusterTrustBundle",
    pod_certificate: "podCertificate",
});

message!(api::core::v1::PersistentVolumeClaimTemplate {
    metadata: "metadata",
    spec: "spec",
});

message!(api::core::v1::ObjectFieldSelector {
    api_version: "apiVersion",
    field_path: "fieldPath",
});

message!(api::core::v1::ResourceFieldSelector {
    container_name: "containerName",
    resource: "resource",
    divisor: "divisor",
});

message!(api::core::v1::ConfigMapKeySelector {
    local_object_reference: "",
    key: "key",
    optional: "optional",
});

message!(api::core::v1::SecretKeySelector {
    local_object_reference: "",
    key: "key",
    optional: "optional",
});

message!(api::core::v1::FileKeySelector {
    volume_name: "volumeName",
    path: "path",
    key: "key",
    optional: "optional",
});

message!(api::core::v1::ExecAction {
    command: "command",
});

message!(api::core::v1::HttpGetAction {
    path: "path",
    port: "port",
    host: "host",
    scheme: "scheme",
    http_headers: "httpHeaders",
});

message!(api::core::v1::TcpSocketAction {
    port: "port",
    host: "host",
});

message!(api::core::v1::GrpcAction {
    port: "port",
    service: "service",
});

message!(api::core::v1::SleepAction {
    seconds: "seconds",
});

message!(api::resource::v1::DeviceToleration {
    key: "key",
    operator: "operator",
    value: "value",
    effect: "effect",
    toleration_seconds: "tolerationSeconds",
});

message!(api::resource::v1::CapacityRequirements {
    requests: "requests",
});

message!(api::resource::v1::CapacityRequestPolicyRange {
    min: "min",
    max: "max",
    step: "step",
});

message!(api::core::v1::SecretProjection {
    local_object_reference: "",
    items: "items",
    optional: "optional",
});

message!(api::core::v1::DownwardAPIProjection {
    items: "items",
});

message!(api::core::v1::ConfigMapProjection {
    local_object_reference: "",
    items: "items",
    optional: "optional",
});

message!(api::core::v1::ServiceAccountTokenProjection {
    audience: "audience",
    expiration_seconds: "expirationSeconds",
    path: "path",
});

message!(api::core::v1::ClusterTrustBundleProjection {
    name: "name",
    signer_name: "signerName",
    label_selector: "labelSelector",
    optional: "optional",
    path: "path",
});

message!(api::core::v1::PodCertificateProjection {
    signer_name: "signerName",
    key_type: "keyType",
    max_expiration_seconds: "maxExpirationSeconds",
    credential_bundle_path: "credentialBundlePath",
    key_path: "keyPath",
    certificate_chain_path: "certificateChainPath",
    user_annotations: "userAnnotations",
});

message!(api::core::v1::PersistentVolumeClaimSpec {
    access_modes: "accessModes",
    selector: "selector",
    resources: "resources",
    volume_name: "volumeName",
    storage_class_name: "storageClassName",
    volume_mode: "volumeMode",
    data_source: "dataSource",
    data_source_ref: "dataSourceRef",
    volume_attributes_class_name: "volumeAttributesClassName",
});

message!(api::core::v1::HttpHeader {
    name: "name",
    value: "value",
});

message!(api::core::v1::VolumeResourceRequirements {
    limits: "limits",
    requests: "requests",
});

message!(api::core::v1::TypedLocalObjectReference {
    api_group: "apiGroup",
    kind: "kind",
    name: "name",
});

message!(api::core::v1::TypedObjectReference {
    api_group: "apiGroup",
    kind: "kind",
    name: "name",
    namespace: "namespace",
});
