/// The web demo at `/` works in a real browser: headless Chromium (Debian's `chromium`, driven
/// by `playwright-core`) acts as a user for every AG-UI feature the page shows, on the embedded
/// default demo agent (a reload mid-answer, nested subagents and the protobuf switch included);
/// the committed build matches its sources; the README's reconnect example works with the real
/// client.
use std::path::{Path, PathBuf};
use std::process::Stdio;

use agui_gateway::{AppState, config::Config};

fn demo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("web-demo")
}

fn require_node_modules() {
    assert!(
        demo_dir().join("node_modules/playwright-core").exists()
            && demo_dir().join("node_modules/esbuild").exists(),
        "web-demo/node_modules is missing: run `npm ci --prefix web-demo` (scripts/test.sh does)"
    );
}

async fn start_default_gateway() -> std::net::SocketAddr {
    let mut config = Config::load(None).unwrap();
    config.data_dir =
        std::env::temp_dir().join(format!("agui-web-demo-{}", uuid::Uuid::new_v4().simple()));
    let state = AppState::from_config(&config).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(agui_gateway::serve(listener, state, std::future::pending()));
    addr
}

#[tokio::test]
async fn the_gateway_serves_the_demo_at_the_root() {
    let addr = start_default_gateway().await;
    let page = reqwest::get(format!("http://{addr}/")).await.unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    let html = page.text().await.unwrap();
    assert!(
        html.contains("<script type=\"module\" src=\"app.js\">"),
        "{html}"
    );
    for (path, kind) in [("/app.js", "text/javascript"), ("/app.css", "text/css")] {
        let r = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with(kind)
        );
        assert!(
            r.bytes().await.unwrap().len() > 1000,
            "{path} is nearly empty"
        );
    }
}

#[test]
fn the_committed_build_matches_its_sources() {
    require_node_modules();
    let out =
        std::env::temp_dir().join(format!("agui-web-build-{}", uuid::Uuid::new_v4().simple()));
    let status = std::process::Command::new("node")
        .arg("build.mjs")
        .arg(&out)
        .current_dir(demo_dir())
        .status()
        .expect("node must be installed");
    assert!(status.success());
    for f in ["index.html", "app.js", "app.css"] {
        let built = std::fs::read(out.join(f)).unwrap();
        let committed = std::fs::read(demo_dir().join("dist").join(f)).unwrap();
        assert!(
            built == committed,
            "web-demo/dist/{f} is stale: run `npm run build --prefix web-demo` and commit dist/"
        );
    }
    let _ = std::fs::remove_dir_all(out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_feature_works_in_headless_chromium() {
    require_node_modules();
    let chromium = std::env::var("CHROMIUM_PATH").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "{chromium} is missing: install Debian's chromium (.ci/run does)"
    );
    let addr = start_default_gateway().await;
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("web-demo-screenshots");
    let out = tokio::process::Command::new("node")
        .arg("e2e.mjs")
        .arg(format!("http://{addr}"))
        .arg(&shots)
        .current_dir(demo_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .await
        .expect("node must be installed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}\n{stderr}");
    assert!(
        out.status.success(),
        "web demo e2e failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("20 passed, 0 failed"), "{stdout}");
}

/// The README's "Reconnect" example, run by Node with the real `@ag-ui/client` as an app would
/// use it: a run left before, inside and after its answer reads on to its end, exactly once,
/// and a delegate run left inside its subagents too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_reconnect_example_picks_runs_up_where_they_were_left() {
    require_node_modules();
    let addr = start_default_gateway().await;
    let out = tokio::process::Command::new("node")
        .arg("readme-reconnect.mjs")
        .arg(format!("http://{addr}"))
        .current_dir(demo_dir())
        .output()
        .await
        .expect("node must be installed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("5 passed, 0 failed"),
        "the README's reconnect example failed:\n{stdout}\n{stderr}"
    );
}
