//! nginx (Debian's package) as the TLS terminator in front of a test server, the way
//! production IM gateways serve `wss://`: started on a free loopback port with its own
//! config, temp paths and the test CA's server certificate, stopped on drop.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::certs::make_certs;
use super::peers::{free_port, required};

/// How long nginx may take to listen.
const START_WAIT: Duration = Duration::from_secs(10);

/// A running nginx, killed on drop.
pub struct Nginx {
    child: Child,
    /// Its TLS port on 127.0.0.1.
    pub port: u16,
    dir: tempfile::TempDir,
}

impl Nginx {
    /// nginx terminating TLS on a free port and proxying WebSocket upgrades to
    /// `127.0.0.1:upstream`, with a certificate for 127.0.0.1 from a fresh test CA.
    /// A missing nginx or openssl fails the test.
    pub fn wss_proxy(upstream: u16) -> Nginx {
        Nginx::start("access_log off;", |port, d| {
            format!(
                "listen 127.0.0.1:{port} ssl;\n    ssl_certificate {d}/server.pem;\n\
                 ssl_certificate_key {d}/server.key;\n\
                 location / {{\n      proxy_pass http://127.0.0.1:{upstream};\n\
                   proxy_http_version 1.1;\n      proxy_set_header Upgrade $http_upgrade;\n\
                   proxy_set_header Connection \"upgrade\";\n      proxy_read_timeout 120s;\n\
                 }}"
            )
        })
    }

    /// nginx serving HTTP/2 on a free port — over TLS (`h2` by ALPN, the test CA's
    /// certificate) when `tls`, else cleartext by prior knowledge (h2c) — and proxying
    /// every request to `127.0.0.1:upstream` over HTTP/1.1, unbuffered (long polls and
    /// event streams pass as they come). Its access log ([`Nginx::access`]) names each
    /// request's connection and protocol.
    pub fn h2_proxy(upstream: u16, tls: bool) -> Nginx {
        let log = "log_format h2 '$connection $server_protocol $request_method $uri $status';\n  \
                   access_log ACCESS h2;";
        Nginx::start(log, |port, d| {
            let listen = if tls {
                format!(
                    "listen 127.0.0.1:{port} ssl http2;\n    ssl_certificate {d}/server.pem;\n\
                     ssl_certificate_key {d}/server.key;"
                )
            } else {
                format!("listen 127.0.0.1:{port} http2;")
            };
            format!(
                "{listen}\n    location / {{\n      proxy_pass http://127.0.0.1:{upstream};\n\
                   proxy_http_version 1.1;\n      proxy_buffering off;\n\
                   proxy_read_timeout 120s;\n    }}"
            )
        })
    }

    /// nginx serving HTTP/1.1 on a free port and proxying every request to
    /// `127.0.0.1:upstream`, unbuffered, with server-side includes on for every answer: that
    /// filter drops the upstream's `Content-Length`, so nginx sends each answer with a body
    /// in chunked transfer coding. Its access log ([`Nginx::access`]) names each request's
    /// method, path, status and the `Transfer-Encoding` nginx sent.
    pub fn chunked_proxy(upstream: u16) -> Nginx {
        let log = "log_format te '$request_method $uri $status $sent_http_transfer_encoding';\n  \
                   access_log ACCESS te;";
        Nginx::start(log, |port, _| {
            format!(
                "listen 127.0.0.1:{port};\n    location / {{\n      ssi on;\n      ssi_types *;\n\
                   proxy_pass http://127.0.0.1:{upstream};\n      proxy_http_version 1.1;\n\
                   proxy_buffering off;\n      proxy_read_timeout 120s;\n    }}"
            )
        })
    }

    /// nginx with the `server` block `server(port, dir)` and the access-log directives
    /// `log` (`ACCESS` in them: the log file's path).
    fn start(log: &str, server: impl Fn(u16, &str) -> String) -> Nginx {
        let openssl = required("openssl");
        let bin = required("nginx");
        let dir = tempfile::tempdir().expect("temp dir");
        make_certs(&openssl, dir.path());
        let port = free_port();
        let d = dir.path().display().to_string();
        let log = log.replace("ACCESS", &format!("{d}/access.log"));
        let conf = format!(
            "daemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n  {log}\n  client_body_temp_path {d}/body;\n\
               proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n\
               uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
               server {{\n    {}\n  }}\n}}\n",
            server(port, &d),
        );
        let conf_path = dir.path().join("nginx.conf");
        std::fs::write(&conf_path, conf).expect("write nginx.conf");
        let child = Command::new(bin)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        let mut n = Nginx { child, port, dir };
        let deadline = Instant::now() + START_WAIT;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = n.child.try_wait() {
                panic!("nginx exited ({status}): {}", n.log());
            }
            assert!(
                Instant::now() < deadline,
                "nginx did not listen within {START_WAIT:?}: {}",
                n.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        n
    }

    /// The access log so far, a line a request, in the format of the proxy that started it
    /// (nginx writes each line when its request ends).
    pub fn access(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("access.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The test CA's certificate, for `ca_file`.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// nginx's error log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
