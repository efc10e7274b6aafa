//! The verifier's rules, event by event.

use super::*;
use crate::protocol::events::Interrupt;

fn started() -> Verifier {
    let mut v = Verifier::new(false);
    v.check(&run_started()).unwrap();
    v
}
fn run_started() -> Event {
    Event::RunStarted {
        thread_id: "t".into(),
        run_id: "r".into(),
        parent_run_id: None,
        protocol_version: None,
        input: None,
    }
}
fn finished(outcome: Option<Outcome>) -> Event {
    Event::RunFinished {
        thread_id: "t".into(),
        run_id: "r".into(),
        result: None,
        outcome,
        usage: None,
    }
}
fn text_start(id: &str) -> Event {
    Event::TextMessageStart {
        message_id: id.into(),
        role: None,
        name: None,
    }
}
fn content(id: &str, d: &str) -> Event {
    Event::TextMessageContent {
        message_id: id.into(),
        delta: d.into(),
    }
}
fn call_start(id: &str) -> Event {
    Event::ToolCallStart {
        tool_call_id: id.into(),
        tool_call_name: "f".into(),
        parent_message_id: None,
    }
}
fn args(id: &str, d: &str) -> Event {
    Event::ToolCallArgs {
        tool_call_id: id.into(),
        delta: d.into(),
    }
}
fn call_end(id: &str) -> Event {
    Event::ToolCallEnd {
        tool_call_id: id.into(),
    }
}
fn result(msg: &str, call: &str) -> Event {
    Event::ToolCallResult {
        message_id: msg.into(),
        tool_call_id: call.into(),
        content: ToolResultContent::Text("ok".into()),
        role: Some("tool".into()),
    }
}

#[test]
fn first_event_must_start_or_fail_the_run() {
    let mut v = Verifier::new(true);
    assert!(v.check(&text_start("m")).is_err());
    let mut v = Verifier::new(true);
    v.check(&Event::RunError {
        message: "x".into(),
        code: None,
        usage: None,
    })
    .unwrap();
    assert!(v.check(&run_started()).is_err(), "nothing after RUN_ERROR");
}

#[test]
fn a_valid_parallel_stream_passes() {
    let mut v = started();
    for e in [
        text_start("m"),
        content("m", "hi"),
        call_start("a"),
        call_start("b"),
        args("b", "{\"x\":"),
        args("a", "{}"),
        args("b", "1}"),
        call_end("a"),
        call_end("b"),
        text_start("m2"),
        Event::TextMessageEnd {
            message_id: "m".into(),
        },
        Event::TextMessageEnd {
            message_id: "m2".into(),
        },
        result("r1", "a"),
        finished(None),
    ] {
        v.check(&e).unwrap_or_else(|err| panic!("{e:?}: {err}"));
    }
    assert!(v.is_closed());
    assert!(
        v.check(&text_start("z")).is_err(),
        "nothing after RUN_FINISHED"
    );
}

#[test]
fn unbalanced_and_reused_ids_are_caught() {
    let mut v = started();
    assert!(v.check(&content("m", "x")).is_err());
    v.check(&text_start("m")).unwrap();
    assert!(v.check(&text_start("m")).is_err(), "double start");
    assert!(v.check(&content("m", "")).is_err(), "empty delta");
    v.check(&Event::TextMessageEnd {
        message_id: "m".into(),
    })
    .unwrap();
    assert!(v.check(&text_start("m")).is_err(), "id reuse");
    assert!(v.check(&args("c", "{}")).is_err(), "args before start");
    v.check(&call_start("c")).unwrap();
    v.check(&args("c", "{")).unwrap();
    v.check(&call_end("c")).unwrap();
    let mut v = started();
    v.check(&call_start("c")).unwrap();
    assert!(v.check(&result("r", "c")).is_err(), "result before end");
    v.check(&args("c", "{}")).unwrap();
    v.check(&call_end("c")).unwrap();
    assert!(v.check(&args("c", "1")).is_err(), "args after end");
    v.check(&result("r", "c")).unwrap();
    assert!(v.check(&result("r2", "c")).is_err(), "second result");
    assert!(v.check(&result("r3", "zzz")).is_err(), "unknown call");
}

#[test]
fn run_finished_needs_everything_closed() {
    let mut v = started();
    v.check(&call_start("c")).unwrap();
    assert!(v.check(&finished(None)).is_err());
    let mut v = started();
    v.check(&Event::StepStarted {
        step_name: "s".into(),
    })
    .unwrap();
    assert!(v.check(&finished(None)).is_err());
    let mut v = started();
    v.check(&Event::ReasoningStart {
        message_id: "r".into(),
    })
    .unwrap();
    assert!(v.check(&finished(None)).is_err());
}

#[test]
fn closers_close_everything() {
    let mut v = started();
    v.check(&Event::StepStarted {
        step_name: "s".into(),
    })
    .unwrap();
    v.check(&Event::ReasoningStart {
        message_id: "r".into(),
    })
    .unwrap();
    v.check(&Event::ReasoningMessageStart {
        message_id: "rm".into(),
        role: "reasoning".into(),
    })
    .unwrap();
    v.check(&text_start("m")).unwrap();
    v.check(&call_start("c")).unwrap();
    v.check(&args("c", "{}")).unwrap();
    for (e, by) in v.closers() {
        v.check_as(&e, by.as_deref())
            .unwrap_or_else(|err| panic!("{e:?}: {err}"));
    }
    v.check(&finished(None)).unwrap();
}

#[test]
fn one_point_oh_shapes_need_a_one_point_oh_client() {
    let pending = Some(Outcome::Success {
        pending_tool_call_ids: Some(vec!["c".into()]),
    });
    assert!(started().check(&finished(pending.clone())).is_err());
    assert!(
        started()
            .check(&finished(Some(Outcome::Cancelled)))
            .is_err()
    );
    let mut v1 = Verifier::new(true);
    v1.check(&run_started()).unwrap();
    v1.check(&finished(pending)).unwrap();
    let mut v = started();
    v.know_tool_calls(["old".to_string()]);
    let parts = Event::ToolCallResult {
        message_id: "m".into(),
        tool_call_id: "old".into(),
        content: ToolResultContent::Parts(vec![]),
        role: None,
    };
    assert!(v.check(&parts).is_err());
    v.check(&result("m", "old")).unwrap();
    let sub = Event::SubagentError {
        subagent_run_id: "s".into(),
        message: "m".into(),
        code: None,
    };
    assert!(started().check(&sub).is_err());
    let empty = Some(Outcome::Interrupt {
        interrupts: Vec::<Interrupt>::new(),
    });
    assert!(started().check(&finished(empty)).is_err());
}

fn sub_started(id: &str, parent: Option<&str>) -> Event {
    Event::SubagentStarted {
        subagent_run_id: id.into(),
        name: "n".into(),
        description: None,
        parent_subagent_run_id: parent.map(str::to_string),
        parent_tool_call_id: None,
        parent_message_id: None,
    }
}
fn sub_finished(id: &str) -> Event {
    Event::SubagentFinished {
        subagent_run_id: id.into(),
        result: None,
        outcome: None,
    }
}

#[test]
fn subagents_nest_own_their_work_and_must_finish() {
    let mut v = Verifier::new(true);
    v.check(&run_started()).unwrap();
    assert!(
        v.check_as(&text_start("m"), Some("s1")).is_err(),
        "not started"
    );
    assert!(
        v.check(&sub_started("s2", Some("s1"))).is_err(),
        "unknown parent"
    );
    v.check(&sub_started("s1", None)).unwrap();
    v.check(&sub_started("s2", Some("s1"))).unwrap();
    // Concurrent messages and reasoning spans of different agents, and the same step name.
    v.check_as(&text_start("a"), Some("s1")).unwrap();
    v.check_as(&text_start("b"), Some("s2")).unwrap();
    v.check(&text_start("c")).unwrap();
    for by in [None, Some("s1")] {
        v.check_as(
            &Event::ReasoningStart {
                message_id: format!("r{by:?}"),
            },
            by,
        )
        .unwrap();
        v.check_as(
            &Event::StepStarted {
                step_name: "step".into(),
            },
            by,
        )
        .unwrap();
    }
    assert!(
        v.check_as(&content("a", "x"), Some("s2")).is_err(),
        "wrong owner"
    );
    assert!(v.check(&content("a", "x")).is_err(), "owner missing");
    v.check_as(&content("a", "x"), Some("s1")).unwrap();
    assert!(
        v.check_as(&sub_started("s3", None), Some("s1")).is_err(),
        "subagent events carry no attribution"
    );
    assert!(v.check(&sub_finished("s9")).is_err(), "not active");
    // A failing run closes everything, subagents innermost first.
    let closers = v.closers();
    let subs: Vec<&str> = closers
        .iter()
        .filter_map(|(e, _)| match e {
            Event::SubagentError {
                subagent_run_id, ..
            } => Some(subagent_run_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(subs, ["s2", "s1"]);
    let mut w = Verifier::new(true);
    w.check(&run_started()).unwrap();
    w.check(&sub_started("s1", None)).unwrap();
    assert!(w.check(&finished(None)).is_err(), "subagent still active");
    w.check(&sub_finished("s1")).unwrap();
    assert!(
        w.check(&sub_started("s1", None)).is_err(),
        "ids are per invocation"
    );
    assert!(
        w.check_as(&text_start("z"), Some("s1")).is_err(),
        "finished"
    );
    w.check(&finished(None)).unwrap();
    let mut old = Verifier::new(false);
    old.check(&run_started()).unwrap();
    assert!(old.check_as(&text_start("m"), Some("s1")).is_err());
}
