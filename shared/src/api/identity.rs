//! Who calls a mutating operation (docs/SECURITY.md, "Who decided").
//!
//! A mutating operation is served on `<prefix>.api.<service>.<op>` and on
//! `<prefix>.api.<service>.<op>.as.<identity>`. NATS permissions let a
//! person publish only on their own `.as.<name>` subjects, so the token is
//! an authenticated identity where the body's `decided_by` is only a
//! claim. The API server therefore writes the operation's
//! [`super::Operation::ACTOR_FIELD`] from the token (or, when identity is
//! required and the subject is bare, from the shared `operator` role)
//! before the request is decoded: the records then name who really acted.

use serde_json::{Map, Value};

use super::error::ApiError;
use crate::subjects::{decode_token, encode_token, Subjects};

/// The token between an operation and the caller's identity.
pub const AS: &str = "as";

/// The identity of a bare request when identity is required: the shared
/// operator role (the CLI and console without a personal identity).
pub const OPERATOR: &str = "operator";

/// Longest identity accepted, in bytes (a person's or role's name, not a
/// document).
pub const MAX_IDENTITY_BYTES: usize = 128;

/// `<prefix>.api.<service>.<op>.as.<identity>`, every part token-encoded.
pub fn subject_as(subjects: &Subjects, service: &str, operation: &str, identity: &str) -> String {
    format!(
        "{}.{AS}.{}",
        subjects.api(service, operation),
        encode_token(identity)
    )
}

/// What a request subject addresses, below `<prefix>.api.<service>.`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addressed {
    /// The operation's token (as routes are keyed).
    pub op: String,
    /// The caller's identity from `.as.<identity>`, decoded.
    pub identity: Option<String>,
}

/// Reads `rest`, the subject after `<prefix>.api.<service>.`: `<op>` or
/// `<op>.as.<identity>`. Anything else, or an identity that is empty, too
/// long or not a valid token, is `bad_request`.
pub fn parse(rest: &str) -> Result<Addressed, ApiError> {
    let tokens: Vec<&str> = rest.split('.').collect();
    match tokens.as_slice() {
        [op] => Ok(Addressed {
            op: op.to_string(),
            identity: None,
        }),
        [op, AS, id] => {
            let identity = decode_token(id).map_err(|e| {
                ApiError::bad_request(format!("identity token `{id}` is not valid: {e}"))
            })?;
            if identity.is_empty() || identity.len() > MAX_IDENTITY_BYTES {
                return Err(ApiError::bad_request(format!(
                    "identity must be 1..={MAX_IDENTITY_BYTES} bytes, got {}",
                    identity.len()
                )));
            }
            Ok(Addressed {
                op: op.to_string(),
                identity: Some(identity),
            })
        }
        _ => Err(ApiError::bad_request(format!(
            "subject ending `{rest}` is neither `<operation>` nor `<operation>.as.<identity>`"
        ))),
    }
}

/// The actor a mutating request acts as: the subject's identity; else,
/// when identity is required, [`OPERATOR`]; else none (the body's value
/// stands).
pub fn actor(identity: Option<&str>, require_identity: bool) -> Option<&str> {
    match identity {
        Some(id) => Some(id),
        None if require_identity => Some(OPERATOR),
        None => None,
    }
}

/// Applies the identity rules to a request `body` for an operation that
/// `mutates` (or not) and names its actor in `actor_field`: a read
/// operation called `.as.<identity>` is refused (`unknown_operation`: it is
/// served on its bare subject only); a mutating one gets its actor field
/// set as [`actor`] says.
pub fn apply(
    body: &mut Value,
    mutates: bool,
    actor_field: Option<&str>,
    identity: Option<&str>,
    require_identity: bool,
) -> Result<(), ApiError> {
    if !mutates {
        return match identity {
            Some(_) => Err(ApiError::new(
                super::CODE_UNKNOWN_OPERATION,
                "this operation changes nothing, so it is served on its bare subject only, not `.as.<identity>`",
            )),
            None => Ok(()),
        };
    }
    if let (Some(field), Some(who)) = (actor_field, actor(identity, require_identity)) {
        set_actor(body, field, who);
    }
    Ok(())
}

/// Sets `field` of the request body to `actor`, replacing what the body
/// said. An empty body (`null`) becomes `{field: actor}`; a body that is
/// not an object is left for the decoder to refuse.
pub fn set_actor(body: &mut Value, field: &str, actor: &str) {
    if body.is_null() {
        *body = Value::Object(Map::new());
    }
    if let Value::Object(m) = body {
        m.insert(field.to_string(), Value::String(actor.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::client::decode_request;
    use crate::api::coordinator::gates::GateDecide;
    use crate::api::{Operation, OperationDoc};
    use serde_json::json;

    /// A gate decision as `identity` (None: bare) with `require_identity`;
    /// the reviewer the coordinator would record.
    fn decided_by(identity: Option<&str>, require_identity: bool) -> String {
        let mut body = json!({"workflow_id": "w1", "action": "approve", "reviewer": "mallory"});
        apply(
            &mut body,
            GateDecide::MUTATES,
            GateDecide::ACTOR_FIELD,
            identity,
            require_identity,
        )
        .unwrap();
        decode_request::<GateDecide>(body).unwrap().reviewer
    }

    #[test]
    fn a_gate_decision_records_the_caller_not_the_body() {
        assert_eq!(decided_by(Some("alice"), true), "alice");
        assert_eq!(decided_by(Some("alice"), false), "alice");
        assert_eq!(decided_by(None, true), OPERATOR);
        assert_eq!(decided_by(None, false), "mallory", "auth off: as today");
    }

    #[test]
    fn read_operations_are_not_served_as_an_identity() {
        let mut body = json!({"workflow_id": "w1"});
        let e = apply(&mut body, false, None, Some("alice"), true).unwrap_err();
        assert_eq!(e.code, "unknown_operation");
        apply(&mut body, false, None, None, true).unwrap();
        assert_eq!(body, json!({"workflow_id": "w1"}));
        // A mutating operation without an actor field is served as-is.
        apply(&mut body, true, None, Some("alice"), true).unwrap();
        assert_eq!(body, json!({"workflow_id": "w1"}));
    }

    /// `O`'s request reads its actor field: a body carrying only that
    /// field fails on some other missing field, never as unknown.
    fn reads_actor<O: Operation>() -> &'static str {
        let field = O::ACTOR_FIELD.expect("an actor field");
        let mut body = Value::Null;
        set_actor(&mut body, field, "alice");
        if let Err(e) = decode_request::<O>(body) {
            assert!(
                !e.message.contains("unknown field"),
                "{}.{}: {}",
                O::SERVICE,
                O::NAME,
                e.message
            );
        }
        field
    }

    /// Every actor field belongs to a mutating operation, and the request
    /// types read the ones named.
    #[test]
    fn actor_fields_are_fields_of_mutating_requests() {
        use crate::api::{coordinator as c, facilitator as f};
        let with_actor: Vec<OperationDoc> = crate::api::catalog()
            .into_iter()
            .filter(|d| d.actor_field.is_some())
            .collect();
        for d in &with_actor {
            assert!(
                d.mutates,
                "{}.{} names an actor but changes nothing",
                d.service, d.name
            );
        }
        let checked = [
            reads_actor::<c::gates::GateDecide>(),
            reads_actor::<c::gates::GateReview>(),
            reads_actor::<c::gates::Rerun>(),
            reads_actor::<c::control::Pause>(),
            reads_actor::<f::Decide>(),
            reads_actor::<f::GateReview>(),
        ];
        assert_eq!(checked.len(), with_actor.len(), "{with_actor:?}");
        // The facilitator's review flattens its action: the reviewer is
        // still a top-level field of the body.
        let mut body = json!({"debate_id": "d1", "action": "confirm", "reviewer": "mallory"});
        apply(&mut body, true, Some("reviewer"), Some("alice"), false).unwrap();
        let r = decode_request::<f::GateReview>(body).unwrap();
        assert_eq!(
            r.action,
            crate::api::facilitator::GateAction::Confirm {
                reviewer: "alice".into()
            }
        );
    }

    #[test]
    fn subjects_name_the_identity_as_one_token() {
        let s = Subjects::new("caucus");
        assert_eq!(
            subject_as(&s, "coordinator", "gate_decide", "alice"),
            "caucus.api.coordinator.gate_decide.as.alice"
        );
        let odd = subject_as(&s, "coordinator", "gate_decide", "a.b c");
        let rest = odd.strip_prefix("caucus.api.coordinator.").unwrap();
        assert_eq!(
            parse(rest).unwrap(),
            Addressed {
                op: "gate_decide".into(),
                identity: Some("a.b c".into()),
            }
        );
    }

    #[test]
    fn bare_and_as_subjects_parse_others_are_refused() {
        assert_eq!(
            parse("pause").unwrap(),
            Addressed {
                op: "pause".into(),
                identity: None,
            }
        );
        assert_eq!(
            parse("pause.as.bob").unwrap().identity.as_deref(),
            Some("bob")
        );
        for bad in ["pause.by.bob", "pause.as", "pause.as.~", "pause.as.~Z"] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.code, "bad_request", "{bad}");
        }
        let long = "x".repeat(MAX_IDENTITY_BYTES + 1);
        assert!(parse(&format!("pause.as.{long}")).is_err());
        let longest = "x".repeat(MAX_IDENTITY_BYTES);
        assert!(parse(&format!("pause.as.{longest}")).is_ok());
    }

    #[test]
    fn the_token_wins_then_operator_when_required_else_the_body() {
        assert_eq!(actor(Some("alice"), false), Some("alice"));
        assert_eq!(actor(Some("alice"), true), Some("alice"));
        assert_eq!(actor(None, true), Some(OPERATOR));
        assert_eq!(actor(None, false), None);
    }

    #[test]
    fn the_actor_field_is_overwritten_or_added() {
        let mut body = json!({"workflow_id": "w", "reviewer": "mallory"});
        set_actor(&mut body, "reviewer", "alice");
        assert_eq!(body, json!({"workflow_id": "w", "reviewer": "alice"}));
        let mut empty = Value::Null;
        set_actor(&mut empty, "requested_by", "operator");
        assert_eq!(empty, json!({"requested_by": "operator"}));
        let mut list = json!([1]);
        set_actor(&mut list, "reviewer", "alice");
        assert_eq!(list, json!([1]), "left for the decoder to refuse");
    }
}
