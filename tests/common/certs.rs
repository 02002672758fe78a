//! A test certificate authority made with the `openssl` command: a CA and a server
//! certificate signed by it, for the TLS tests (mqtts, wss, XMPP).

use std::path::Path;
use std::process::Command;

/// Makes `ca.pem`, `server.pem` and `server.key` (a CA and a certificate for 127.0.0.1
/// signed by it) in `dir`, readable by servers that drop root (mosquitto).
pub fn make_certs(openssl: &Path, dir: &Path) {
    make_certs_for(openssl, dir, "127.0.0.1", "IP", "server.pem");
    // mosquitto started as root drops to its own user before it loads the key.
    use std::os::unix::fs::PermissionsExt;
    for (path, mode) in [(dir.to_owned(), 0o755), (dir.join("server.key"), 0o644)] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }
}

/// Makes `ca.pem` (a test CA), `server.key` and the certificate `cert` for `name` (a
/// subject alternative name of type `kind`: `IP` or `DNS`) signed by it, in `dir`.
pub fn make_certs_for(openssl: &Path, dir: &Path, name: &str, kind: &str, cert: &str) {
    let run = |line: &str| {
        let out = Command::new(openssl)
            .args(line.split(' '))
            .current_dir(dir)
            .output()
            .expect("run openssl");
        assert!(out.status.success(), "openssl {line}: {out:?}");
    };
    let ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    run(&format!(
        "req -x509 {ec} -keyout ca.key -out ca.pem -days 2 -subj /CN=test-ca"
    ));
    run(&format!(
        "req {ec} -keyout server.key -out server.csr -subj /CN={name}"
    ));
    std::fs::write(
        dir.join("ext.cnf"),
        format!("subjectAltName={kind}:{name}\n"),
    )
    .expect("ext file");
    run(&format!(
        "x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out {cert} \
         -days 2 -extfile ext.cnf"
    ));
}
