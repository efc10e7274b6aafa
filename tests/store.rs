/// The store suite, run against SQLite (always) and PostgreSQL (`AGUI_TEST_PG`, which CI sets):
/// ordered threads deduplicated by message id, leases that exclude a second run until released
/// or expired, event logs replayed after a sequence number, expiry, owners of threads and runs.
mod common;

use std::sync::Arc;
use std::time::Duration;

use agui_gateway::store::sql::SqlStore;
use agui_gateway::store::{Lease, RunRecord, Store, StoredMessage};
use serde_json::json;

async fn stores() -> Vec<Arc<dyn Store>> {
    let dir = common::temp_dir("store");
    let mut out: Vec<Arc<dyn Store>> = vec![Arc::new(
        SqlStore::open_sqlite(&dir.join("agui.db")).await.unwrap(),
    )];
    if let Some(url) = common::test_pg("the PostgreSQL store") {
        out.push(Arc::new(
            SqlStore::connect_postgres(&url)
                .await
                .expect("AGUI_TEST_PG must point at a running PostgreSQL"),
        ));
    }
    out
}

fn msg(id: &str, role: &str, content: &str) -> StoredMessage {
    StoredMessage::from_agui(json!({"id": id, "role": role, "content": content})).unwrap()
}

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

#[tokio::test]
async fn threads_keep_order_and_deduplicate_by_message_id() {
    for store in stores().await {
        let thread = unique("t");
        store
            .save_messages(
                "a",
                &thread,
                &[msg("1", "user", "hi"), msg("2", "assistant", "hello")],
            )
            .await
            .unwrap();
        // The client re-sends the whole history plus one new message; one message changed.
        store
            .save_messages(
                "a",
                &thread,
                &[
                    msg("1", "user", "hi"),
                    msg("2", "assistant", "hello!"),
                    msg("3", "user", "bye"),
                ],
            )
            .await
            .unwrap();
        let got = store.load_thread("a", &thread).await.unwrap();
        let ids: Vec<&str> = got.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["1", "2", "3"], "{}", store.kind());
        assert_eq!(got[1].body["content"], "hello!");
        // Multimodal and tool-call messages round-trip whole.
        let rich = StoredMessage::from_agui(json!({"id": "4", "role": "assistant", "toolCalls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"x\":1}"}}],
            "encryptedValue": "sig"}))
        .unwrap();
        store
            .save_messages("a", &thread, std::slice::from_ref(&rich))
            .await
            .unwrap();
        assert_eq!(store.load_thread("a", &thread).await.unwrap()[3], rich);
        // An id given twice in one save (one statement carries the batch) counts once, with
        // its last body; more messages than one statement holds all land, in order.
        let many: Vec<StoredMessage> = (0..450)
            .map(|i| msg(&format!("m{i}"), "user", &format!("n{i}")))
            .chain([msg("5", "user", "first"), msg("5", "user", "last")])
            .collect();
        store.save_messages("a", &thread, &many).await.unwrap();
        let got = store.load_thread("a", &thread).await.unwrap();
        assert_eq!(got.len(), 4 + 450 + 1, "{}", store.kind());
        assert_eq!(got[4].id, "m0");
        assert_eq!(got[453].id, "m449");
        assert_eq!(got[454].body["content"], "last");
        // Threads are per agent.
        assert!(store.load_thread("b", &thread).await.unwrap().is_empty());
        store.delete_thread("a", &thread).await.unwrap();
        assert!(store.load_thread("a", &thread).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn leases_exclude_a_second_run_until_released_or_expired() {
    for store in stores().await {
        let thread = unique("t");
        let ttl = Duration::from_secs(30);
        assert_eq!(
            store
                .acquire_lease("a", &thread, "r1", "gw1", ttl)
                .await
                .unwrap(),
            Lease::Acquired
        );
        assert_eq!(
            store
                .acquire_lease("a", &thread, "r2", "gw2", ttl)
                .await
                .unwrap(),
            Lease::Busy {
                run_id: "r1".into()
            }
        );
        // The same gateway's next run on the thread takes over a lease it failed to release
        // (a gateway runs one run per thread, so that lease is stale).
        let left = unique("t-left");
        store
            .acquire_lease("a", &left, "r1", "gw1", ttl)
            .await
            .unwrap();
        assert_eq!(
            store
                .acquire_lease("a", &left, "r2", "gw1", ttl)
                .await
                .unwrap(),
            Lease::Acquired
        );
        assert_eq!(
            store.lease_holder("a", &left).await.unwrap().as_deref(),
            Some("r2")
        );
        assert!(store.renew_lease("a", &thread, "r1", ttl).await.unwrap());
        assert!(!store.renew_lease("a", &thread, "r2", ttl).await.unwrap());
        store.release_lease("a", &thread, "r1").await.unwrap();
        assert_eq!(
            store
                .acquire_lease("a", &thread, "r2", "gw2", Duration::from_millis(1))
                .await
                .unwrap(),
            Lease::Acquired
        );
        // A crashed holder's lease expires and can be taken over.
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(
            store
                .acquire_lease("a", &thread, "r3", "gw3", ttl)
                .await
                .unwrap(),
            Lease::Acquired
        );
        // Two racing acquirers: exactly one wins.
        let racing = unique("race");
        let (x, y) = tokio::join!(
            store.acquire_lease("a", &racing, "rx", "gx", ttl),
            store.acquire_lease("a", &racing, "ry", "gy", ttl)
        );
        let wins = [x.unwrap(), y.unwrap()]
            .iter()
            .filter(|l| **l == Lease::Acquired)
            .count();
        assert_eq!(wins, 1, "{}", store.kind());
    }
}

#[tokio::test]
async fn a_thread_is_claimed_once_and_runs_remember_who_started_them() {
    for store in stores().await {
        let thread = unique("t");
        assert_eq!(store.thread_owner("a", &thread).await.unwrap(), None);
        assert_eq!(
            store.claim_thread("a", &thread, "alice").await.unwrap(),
            "alice"
        );
        // A second claim finds the first owner; the same id of another agent is another thread.
        assert_eq!(
            store.claim_thread("a", &thread, "bob").await.unwrap(),
            "alice"
        );
        assert_eq!(
            store.claim_thread("b", &thread, "bob").await.unwrap(),
            "bob"
        );
        assert_eq!(
            store.thread_owner("a", &thread).await.unwrap().as_deref(),
            Some("alice"),
            "{}",
            store.kind()
        );
        // Deleting the thread lets it go.
        store.delete_thread("a", &thread).await.unwrap();
        assert_eq!(store.thread_owner("a", &thread).await.unwrap(), None);
        let run = RunRecord {
            run_id: unique("run"),
            agent_id: "a".into(),
            thread_id: thread.clone(),
            finished: false,
            owner: "alice".into(),
        };
        assert_eq!(store.run_owner(&run.run_id).await.unwrap(), None);
        store.start_run(&run).await.unwrap();
        // Restarting a run keeps who started it.
        store
            .start_run(&RunRecord {
                owner: "bob".into(),
                ..run.clone()
            })
            .await
            .unwrap();
        assert_eq!(
            store.run(&run.run_id).await.unwrap().unwrap().owner,
            "alice"
        );
        assert_eq!(
            store.run_owner(&run.run_id).await.unwrap().as_deref(),
            Some("alice")
        );
    }
}

#[tokio::test]
async fn event_logs_replay_after_a_sequence_number_and_expire() {
    for store in stores().await {
        let run = RunRecord {
            run_id: unique("run"),
            agent_id: "a".into(),
            thread_id: unique("t"),
            finished: false,
            owner: "k".into(),
        };
        store.start_run(&run).await.unwrap();
        store
            .append_events(&run.run_id, &[(1, "one".into()), (2, "two".into())])
            .await
            .unwrap();
        store
            .append_events(&run.run_id, &[(2, "dup".into()), (3, "three".into())])
            .await
            .unwrap();
        let after = store.events_after(&run.run_id, 1).await.unwrap();
        assert_eq!(
            after,
            vec![(2, "two".to_string()), (3, "three".to_string())]
        );
        assert!(!store.run(&run.run_id).await.unwrap().unwrap().finished);
        store
            .finish_run(&run.run_id, Duration::from_secs(60))
            .await
            .unwrap();
        assert!(store.run(&run.run_id).await.unwrap().unwrap().finished);
        store
            .finish_run(&run.run_id, Duration::from_millis(1))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(store.run(&run.run_id).await.unwrap().is_none());
        assert!(store.purge_expired().await.unwrap() >= 1);
        assert!(store.events_after(&run.run_id, 0).await.unwrap().is_empty());
    }
}

/// One flush of the event-log writer carries many runs: their frames go out in multi-row
/// statements (more runs than one statement holds here), in order with starts and finishes.
#[tokio::test]
async fn one_log_write_carries_the_frames_of_many_runs() {
    use agui_gateway::store::{Chunk, LogWrite};
    for store in stores().await {
        let runs: Vec<RunRecord> = (0..250)
            .map(|_| RunRecord {
                run_id: unique("run"),
                agent_id: "a".into(),
                thread_id: unique("t"),
                finished: false,
                owner: "k".into(),
            })
            .collect();
        let mut writes: Vec<LogWrite> = runs.iter().cloned().map(LogWrite::Start).collect();
        for (i, r) in runs.iter().enumerate() {
            writes.push(LogWrite::Frames(
                Chunk::of(
                    &r.run_id,
                    &[(1, format!("{{\"n\":{i}}}")), (2, "two".into())],
                )
                .into(),
            ));
        }
        writes.push(LogWrite::Finish {
            run_id: runs[0].run_id.as_str().into(),
            keep: Duration::from_secs(60),
        });
        // Frames after a finish in the same flush still land.
        writes.push(LogWrite::Frames(
            Chunk::of(&runs[249].run_id, &[(3, "three".into())]).into(),
        ));
        store.write_log(&writes).await.unwrap();
        for i in [0, 199, 200, 249] {
            let events = store.events_after(&runs[i].run_id, 0).await.unwrap();
            assert_eq!(events[0], (1, format!("{{\"n\":{i}}}")), "run {i}");
            assert_eq!(events[1], (2, "two".to_string()), "run {i}");
        }
        assert_eq!(
            store.events_after(&runs[249].run_id, 2).await.unwrap(),
            vec![(3, "three".to_string())]
        );
        assert!(store.run(&runs[0].run_id).await.unwrap().unwrap().finished);
        assert!(!store.run(&runs[1].run_id).await.unwrap().unwrap().finished);
    }
}
