//! The real `corral run` on a root that fills up (a small tmpfs; mounting one needs root,
//! elsewhere the test says why it did not run): while the disk is full admissions fail
//! with a non-zero exit and `/healthz` says why, the failure is logged once, not per retry;
//! once space is freed the agent admits again on its own, and after a SIGKILL every
//! acknowledged pod is still there.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use corral_testkit::Tmpfs;

use crate::support::{RunningAgent, STATIC_SINGLE_NUMA, WAIT, stderr, stdout, workspace};

/// A Guaranteed one-CPU pod named and uid'd `name`.
fn manifest(dir: &Path, name: &str) -> String {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, uid: {name}}}\n\
             spec:\n  containers:\n    - name: app\n      resources:\n        limits: {{cpu: \"1\", memory: 64Mi}}\n"
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

fn healthz(addr: SocketAddr) -> (String, String) {
    let mut stream = TcpStream::connect_timeout(&addr, WAIT).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    write!(stream, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}

fn served_addr(agent: &RunningAgent) -> SocketAddr {
    let log = agent.log();
    let line = log.lines().find(|l| l.contains("serving metrics")).unwrap();
    let addr = line
        .split("addr=")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next();
    addr.unwrap().parse().unwrap()
}

/// Wait (bounded) until `healthz` answers `status`.
fn wait_health(addr: SocketAddr, status: &str) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let (line, body) = healthz(addr);
        if line.contains(status) {
            return body;
        }
        assert!(Instant::now() < deadline, "/healthz stays {line}: {body}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_full_disk_fails_admissions_cleanly_and_the_agent_recovers_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let disk = match Tmpfs::mount(&dir.path().join("disk"), 4 << 20) {
        Ok(disk) => disk,
        Err(why) => {
            eprintln!("not run: needs a tmpfs ({why})");
            return;
        }
    };
    let root = disk.path().join("root");
    let host = workspace().join(crate::support::MACHINE);
    let flags = [&["--metrics-addr=127.0.0.1:0"], STATIC_SINGLE_NUMA].concat();
    let log = dir.path().join("agent.log");
    let agent = RunningAgent::start(&root, &host, &flags, &log);
    let addr = served_addr(&agent);
    assert_eq!(wait_health(addr, "200 OK"), "ok");
    let admit = |name: &str| agent.cli(&["admit", "-f", &manifest(dir.path(), name)]);
    let mut acknowledged = Vec::new();
    for i in 0..3 {
        let name = format!("before-{i}");
        let out = admit(&name);
        assert!(out.status.success(), "{}", stderr(&out));
        acknowledged.push(name);
    }

    let filler = disk.fill("filler");
    let mut refused = 0;
    for i in 0..10 {
        let out = admit(&format!("full-{i}"));
        if out.status.success() {
            // Admitted only when it truly committed (the journal's last page had room for
            // its record): it must survive like any other.
            acknowledged.push(format!("full-{i}"));
        } else {
            assert!(stderr(&out).contains("state journal"), "{}", stderr(&out));
            refused += 1;
        }
    }
    assert!(refused >= 5, "the disk was not full: {refused} refused");
    let body = wait_health(addr, "503");
    assert!(body.starts_with("state journal"), "{body}");
    // Retried every 50 ms while full; logged once.
    std::thread::sleep(Duration::from_secs(1));
    let errors = agent
        .log()
        .lines()
        .filter(|l| l.contains("ERROR") && l.contains("state journal"))
        .count();
    assert_eq!(errors, 1, "{}", agent.log());

    std::fs::remove_file(&filler).unwrap();
    assert_eq!(wait_health(addr, "200 OK"), "ok");
    let out = admit("after");
    assert!(out.status.success(), "{}", stderr(&out));
    acknowledged.push("after".to_owned());
    assert!(
        agent.log().contains("state journal commits again"),
        "{}",
        agent.log()
    );

    drop(agent); // SIGKILL
    let agent = RunningAgent::start(&root, &host, &flags, dir.path().join("again.log").as_path());
    let status = agent.cli(&["status", "-o", "json"]);
    assert!(status.status.success(), "{}", stderr(&status));
    let listed = stdout(&status);
    for name in &acknowledged {
        assert!(
            listed.contains(&format!("\"{name}\"")),
            "{name} lost: {listed}"
        );
    }
}
