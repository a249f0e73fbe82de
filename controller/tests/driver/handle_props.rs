//! Property tests of the resource-handle data a ledger rebuild reads back from claims: arbitrary
//! text and handle-shaped JSON never panic and whatever parses keeps the format's invariants;
//! well-formed data round-trips through its JSON text and through a claim's allocation result;
//! each kind of defect is refused with a message naming it; and `claim_allocation` over claims
//! with any mix of handles, drivers and UIDs tells ours from others without a panic.

use std::collections::BTreeSet;

use dra_controller::driver::handle::{
    allocation_result, claim_allocation, ClaimAllocationState, HandleData, HandleSharing,
};
use k8s_openapi::api::resource::v1alpha2::{
    AllocationResult, ResourceClaim, ResourceClaimSpec, ResourceClaimStatus, ResourceHandle,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use proptest::prelude::*;
use serde_json::{json, Value};

const DRIVER: &str = "gpu.dra-ledger.io";

/// Whether parsed data keeps the invariants `HandleData::parse` promises.
fn well_formed(data: &HandleData) -> bool {
    let unique: BTreeSet<&String> = data.devices.iter().collect();
    !data.node.is_empty()
        && !data.claim_uid.is_empty()
        && !data.devices.is_empty()
        && unique.len() == data.devices.len()
        && data.devices.iter().all(|d| !d.is_empty())
        && data.sharing != (HandleSharing::Shared { max_consumers: 0 })
}

fn sharing() -> impl Strategy<Value = HandleSharing> {
    prop_oneof![
        Just(HandleSharing::Exclusive),
        (1u32..).prop_map(|max_consumers| HandleSharing::Shared { max_consumers }),
    ]
}

/// Well-formed data with names of any characters.
fn valid_data() -> impl Strategy<Value = HandleData> {
    (
        ".{1,20}",
        prop::collection::btree_set(".{1,12}", 1..6),
        sharing(),
        ".{1,36}",
    )
        .prop_map(|(node, devices, sharing, claim_uid)| HandleData {
            node,
            devices: devices.into_iter().collect(),
            sharing,
            claim_uid,
        })
}

/// A value where a string, list or number belongs: right, wrong or missing kinds.
fn loose() -> impl Strategy<Value = Value> {
    prop_oneof![
        ".{0,8}".prop_map(Value::from),
        Just(Value::from("")),
        prop::collection::vec(
            prop_oneof![
                ".{0,4}".prop_map(Value::from),
                any::<i64>().prop_map(Value::from)
            ],
            0..4
        )
        .prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
    ]
}

fn sharing_json() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(vec!["Exclusive", "Shared", "shared", "", "Other"]).prop_flat_map(
            |mode| {
                (prop::option::of(loose()), prop::option::of(loose())).prop_map(
                    move |(max, extra)| {
                        let mut object = json!({ "mode": mode });
                        if let Some(max) = max {
                            object["maxConsumers"] = max;
                        }
                        if let Some(extra) = extra {
                            object["extra"] = extra;
                        }
                        object
                    },
                )
            }
        ),
        loose(),
    ]
}

/// A handle-shaped JSON object: each key present or not, with right or wrong values.
fn handle_json() -> impl Strategy<Value = Value> {
    (
        prop::option::of(loose()),
        prop::option::of(loose()),
        prop::option::of(sharing_json()),
        prop::option::of(loose()),
        prop::option::of(loose()),
    )
        .prop_map(|(node, devices, sharing, uid, extra)| {
            let mut object = serde_json::Map::new();
            for (key, value) in [
                ("node", node),
                ("devices", devices),
                ("sharing", sharing),
                ("claimUID", uid),
                ("unknownField", extra),
            ] {
                if let Some(value) = value {
                    object.insert(key.to_owned(), value);
                }
            }
            Value::Object(object)
        })
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics_and_what_parses_is_well_formed(
        text in prop_oneof![".{0,200}", "[{}\\[\\]\":, a-zA-Z0-9]{0,80}"],
    ) {
        match HandleData::parse(&text) {
            Ok(data) => prop_assert!(well_formed(&data), "{text}"),
            Err(reason) => prop_assert!(!reason.to_string().is_empty()),
        }
    }

    #[test]
    fn handle_shaped_json_parses_only_when_well_formed_and_then_round_trips(
        value in handle_json(),
    ) {
        let text = value.to_string();
        match HandleData::parse(&text) {
            Ok(data) => {
                prop_assert!(well_formed(&data), "{text}");
                prop_assert_eq!(HandleData::parse(&data.to_json()).ok(), Some(data));
            }
            Err(reason) => prop_assert!(!reason.to_string().is_empty(), "{text}"),
        }
    }

    #[test]
    fn well_formed_data_round_trips_through_text_and_a_claims_allocation(
        data in valid_data(),
        shareable in any::<bool>(),
    ) {
        prop_assert_eq!(HandleData::parse(&data.to_json()).ok(), Some(data.clone()));
        let result = allocation_result(DRIVER, &data, shareable);
        prop_assert_eq!(result.shareable, Some(shareable));
        let claim = claim(&data.claim_uid, Some(DRIVER), Some(result));
        prop_assert_eq!(
            claim_allocation(&claim, DRIVER).ok(),
            Some(ClaimAllocationState::Ours(data))
        );
    }
}

/// One defect of otherwise well-formed data, with a word its rejection must contain.
#[derive(Clone, Debug)]
enum Defect {
    EmptyNode,
    EmptyUid,
    NoDevices,
    EmptyDevice(usize),
    RepeatedDevice(usize),
    ZeroConsumers,
    MissingField(&'static str),
    WrongType(&'static str),
    UnknownMode(String),
    UnknownSharingField,
    ExclusiveWithMax(u32),
    SharedWithoutMax,
}

fn defect() -> impl Strategy<Value = Defect> {
    let field = prop::sample::select(vec!["node", "devices", "sharing", "claimUID"]);
    prop_oneof![
        Just(Defect::EmptyNode),
        Just(Defect::EmptyUid),
        Just(Defect::NoDevices),
        (0..8usize).prop_map(Defect::EmptyDevice),
        (0..8usize).prop_map(Defect::RepeatedDevice),
        Just(Defect::ZeroConsumers),
        field.clone().prop_map(Defect::MissingField),
        field.prop_map(Defect::WrongType),
        "[a-z]{1,8}|EXCLUSIVE".prop_map(Defect::UnknownMode),
        Just(Defect::UnknownSharingField),
        any::<u32>().prop_map(Defect::ExclusiveWithMax),
        Just(Defect::SharedWithoutMax),
    ]
}

/// The JSON of `data` with `defect`, and the text the rejection must contain.
fn broken(data: &HandleData, defect: &Defect) -> (Value, String) {
    let mut value: Value = serde_json::from_str(&data.to_json()).unwrap();
    let devices = data.devices.len();
    let expect = match defect {
        Defect::EmptyNode => {
            value["node"] = json!("");
            "node is empty".to_owned()
        }
        Defect::EmptyUid => {
            value["claimUID"] = json!("");
            "claimUID is empty".to_owned()
        }
        Defect::NoDevices => {
            value["devices"] = json!([]);
            "devices is empty".to_owned()
        }
        Defect::EmptyDevice(i) => {
            value["devices"][i % devices] = json!("");
            "device \"\" is empty or listed twice".to_owned()
        }
        Defect::RepeatedDevice(i) => {
            let name = data.devices[i % devices].clone();
            value["devices"].as_array_mut().unwrap().push(json!(name));
            format!("device {name:?} is empty or listed twice")
        }
        Defect::ZeroConsumers => {
            value["sharing"] = json!({"mode": "Shared", "maxConsumers": 0});
            "sharing.maxConsumers must be at least 1".to_owned()
        }
        Defect::MissingField(field) => {
            value.as_object_mut().unwrap().remove(*field);
            format!("missing field `{field}`")
        }
        Defect::WrongType(field) => {
            value[*field] = json!(7);
            "invalid type".to_owned()
        }
        Defect::UnknownMode(mode) => {
            value["sharing"] = json!({ "mode": mode });
            format!("unknown variant `{mode}`")
        }
        Defect::UnknownSharingField => {
            value["sharing"]["shares"] = json!(3);
            "unknown field `shares`".to_owned()
        }
        Defect::ExclusiveWithMax(max) => {
            value["sharing"] = json!({"mode": "Exclusive", "maxConsumers": max});
            "maxConsumers is only allowed with mode Shared".to_owned()
        }
        Defect::SharedWithoutMax => {
            value["sharing"] = json!({"mode": "Shared"});
            "missing field `maxConsumers`".to_owned()
        }
    };
    (value, expect)
}

proptest! {
    #[test]
    fn each_defect_is_refused_with_a_message_naming_it(data in valid_data(), defect in defect()) {
        let (value, expected) = broken(&data, &defect);
        let text = value.to_string();
        let reason = HandleData::parse(&text).expect_err("broken data is refused").to_string();
        prop_assert!(reason.contains(&expected), "{defect:?}: {reason:?} lacks {expected:?}");
        // The same rejection, named, when a rebuild reads it from a claim.
        let mut result = allocation_result(DRIVER, &data, false);
        result.resource_handles.as_mut().unwrap()[0].data = Some(text);
        let from_claim = claim_allocation(&claim(&data.claim_uid, Some(DRIVER), Some(result)), DRIVER);
        prop_assert_eq!(from_claim.map_err(|error| error.to_string()), Err(reason));
    }
}

fn claim(uid: &str, driver: Option<&str>, allocation: Option<AllocationResult>) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some("c".into()),
            namespace: Some("default".into()),
            uid: Some(uid.into()),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimSpec::default(),
        status: Some(ResourceClaimStatus {
            allocation,
            driver_name: driver.map(Into::into),
            ..ResourceClaimStatus::default()
        }),
    }
}

/// A handle of this driver, another, or none named, with good, broken or no data.
fn handle(data: &HandleData) -> impl Strategy<Value = ResourceHandle> {
    let good = data.to_json();
    (
        prop::option::of(prop::sample::select(vec![DRIVER, "other.example.com"])),
        prop_oneof![Just(Some(good)), ".{0,20}".prop_map(Some), Just(None),],
    )
        .prop_map(|(driver, data)| ResourceHandle {
            driver_name: driver.map(str::to_owned),
            data,
            structured_data: None,
        })
}

proptest! {
    #[test]
    fn claims_with_any_handles_are_told_apart_without_a_panic(
        (data, handles) in valid_data().prop_flat_map(|d| {
            (Just(d.clone()), prop::option::of(prop::collection::vec(handle(&d), 0..3)))
        }),
        status_driver in prop::option::of(prop::sample::select(vec![DRIVER, "other.example.com"])),
        same_uid in any::<bool>(),
        allocated in any::<bool>(),
    ) {
        let uid = if same_uid { data.claim_uid.clone() } else { format!("{}-other", data.claim_uid) };
        let allocation = allocated.then(|| AllocationResult {
            resource_handles: handles.clone(),
            ..AllocationResult::default()
        });
        let state = claim_allocation(&claim(&uid, status_driver, allocation), DRIVER);
        let ours: Vec<&ResourceHandle> = handles
            .iter()
            .flatten()
            .filter(|h| h.driver_name.as_deref().is_none_or(|d| d == DRIVER))
            .collect();
        let expected_ours = allocated
            && status_driver == Some(DRIVER)
            && same_uid
            && ours.len() == 1
            && ours[0].data.as_deref() == Some(data.to_json().as_str());
        match (&state, allocated, status_driver) {
            (Ok(ClaimAllocationState::Unallocated), false, _) => {}
            (Ok(ClaimAllocationState::OtherDriver), true, d) if d != Some(DRIVER) => {}
            (Ok(ClaimAllocationState::Ours(got)), true, Some(DRIVER)) => {
                prop_assert!(well_formed(got));
                prop_assert_eq!(&got.claim_uid, &uid);
                // Only other valid JSON of ours could also parse; the generated one is `data`.
                if ours[0].data.as_deref() == Some(data.to_json().as_str()) {
                    prop_assert_eq!(got, &data);
                }
            }
            (Err(reason), true, Some(DRIVER)) => {
                prop_assert!(!reason.to_string().is_empty());
                prop_assert!(!expected_ours, "refused: {reason}");
            }
            (other, ..) => prop_assert!(false, "{other:?} for allocated={allocated} driver={status_driver:?}"),
        }
        if expected_ours {
            prop_assert_eq!(state.ok(), Some(ClaimAllocationState::Ours(data)));
        }
    }
}
