//! `msgstorm validate --frames` for the reference server's protocol: every frame the
//! driver sends, the signals' included, without connecting.

use crate::common::run::msgstorm;

#[tokio::test]
async fn validate_frames_shows_the_login_the_messages_and_every_signal() {
    let ran = msgstorm(&["validate", "scenarios/default.toml", "--frames"]).await;
    ran.expect_code(0);
    for shown in [
        "login of u0:",
        r#""type":"login""#,
        r#""type":"send","ref":1,"to":{"user":"u1"}"#,
        r#""to":{"group":"group-1"}"#,
        r#""type":"contacts","ref":3,"add":["u1"]"#,
        r#""type":"presence","status":"online","note":"P"#,
        r#""type":"typing","to":{"user":"u1"},"state":"start","note":"T"#,
        r#""type":"receipt","ref":4,"to":"u1","conv":"d:u0:u1","note":"R"#,
    ] {
        assert!(ran.stdout.contains(shown), "{shown} not in {ran}");
    }
}
