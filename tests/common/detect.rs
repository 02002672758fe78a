//! Where the real peers of the integration tests are. One file for both sides, so they
//! never disagree: `build.rs` includes it to mark the tests of a missing peer ignored
//! (`cfg(peer_<name>)`, see [`peers`]), and the fixtures find the peers they start with it.
//! Standard library only: the build script has no dependencies.

use std::path::{Path, PathBuf};

/// The directories a program is looked for in: `PATH`, then `/usr/sbin` and `/usr/bin`
/// (Debian puts servers into `/usr/sbin`, which a user's `PATH` may lack).
pub fn program_dirs() -> Vec<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .collect()
}

/// Where the program `name` is in [`program_dirs`].
pub fn program(name: &str) -> Option<PathBuf> {
    program_dirs()
        .into_iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// node: Debian's `/usr/bin/node`, else `/usr/local/bin/node`.
pub fn node() -> Option<PathBuf> {
    ["/usr/bin/node", "/usr/local/bin/node"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// The parent of ejabberd's code directory (`ERL_LIBS`), when ejabberd and Erlang's
/// `/usr/bin/erl` are installed (Debian's packages).
pub fn ejabberd_libs() -> Option<PathBuf> {
    [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib/erlang/lib",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|d| {
        std::fs::read_dir(d).is_ok_and(|mut it| {
            it.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("ejabberd-")))
        })
    })
    .filter(|_| Path::new("/usr/bin/erl").is_file())
}

/// Prosody (Debian's package).
pub const PROSODY: &str = "/usr/bin/prosody";

/// redis-server (Debian's package).
pub const REDIS_SERVER: &str = "/usr/bin/redis-server";

/// The Socket.IO chat app's modules, in the repository (`npm ci` in `peers/socketio`).
pub const SOCKETIO_MODULES: &str = "peers/socketio/node_modules/socket.io";

/// The SocketCluster server's modules, in the repository (`npm ci` in
/// `peers/socketcluster`).
pub const SOCKETCLUSTER_MODULES: &str = "peers/socketcluster/node_modules/socketcluster-server";

/// The Centrifuge chat server, in the repository (`go build` in `peers/centrifuge`).
pub const CENTRIFUGE: &str = "peers/centrifuge/centrifuge-chat";

/// The class path of Netty's WorldClock example server, in the repository (Maven's
/// `dependency:build-classpath` in `peers/netty-worldclock`).
pub const NETTY_CLASSPATH: &str = "peers/netty-worldclock/cp.txt";

/// Tinode's server and its database tool, in the repository (`go build` of
/// github.com/tinode/chat by `scripts/test`).
pub const TINODE: &str = "peers/tinode/bin/tinode";

/// OpenIM's API server, in the repository (`go build` of OpenIM v3.8.3 and FerretDB by
/// `scripts/test`, with Kafka's class path beside them); its stack also needs etcd,
/// redis-server, PostgreSQL and Java.
pub const OPENIM: &str = "peers/openim/bin/openim-api";

/// Kafka's class path for OpenIM's stack (Maven's `dependency:build-classpath`).
pub const OPENIM_KAFKA: &str = "peers/openim/kafka-cp.txt";

/// Synapse's server program, in the repository (a virtual environment made by
/// `scripts/test`, `pip install matrix-synapse`).
pub const SYNAPSE: &str = "peers/synapse/venv/bin/synapse_homeserver";

/// The directory of PostgreSQL's server programs (Debian's `postgresql` package: one
/// folder per major version; the newest is taken).
pub fn postgres_bin() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|d| d.join("postgres").is_file() && d.join("initdb").is_file())
        .collect();
    dirs.sort_by_key(|d| {
        d.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    dirs.pop()
}

/// Every peer as its `cfg(peer_<name>)` name and whether it is installed (`root`: the
/// repository). `scripts/test` installs them all.
pub fn peers(root: &Path) -> [(&'static str, bool); 18] {
    let found = |name| program(name).is_some();
    let node = node().is_some();
    [
        ("mosquitto", found("mosquitto") && found("mosquitto_passwd")),
        ("openssl", found("openssl")),
        ("nginx", found("nginx")),
        ("chromium", found("chromium") || found("chromium-browser")),
        ("kubectl", found("kubectl")),
        ("kubernetes_validate", found("kubernetes-validate")),
        ("ejabberd", ejabberd_libs().is_some()),
        ("prosody", Path::new(PROSODY).is_file()),
        ("redis", Path::new(REDIS_SERVER).exists()),
        ("socketio", node && root.join(SOCKETIO_MODULES).exists()),
        (
            "socketcluster",
            node && root.join(SOCKETCLUSTER_MODULES).exists(),
        ),
        ("centrifuge", root.join(CENTRIFUGE).exists()),
        ("xmllint", found("xmllint")),
        ("prometheus", found("prometheus")),
        (
            "netty",
            found("java") && root.join(NETTY_CLASSPATH).exists(),
        ),
        (
            "tinode",
            postgres_bin().is_some() && root.join(TINODE).exists(),
        ),
        ("synapse", root.join(SYNAPSE).exists()),
        (
            "openim",
            root.join(OPENIM).exists()
                && root.join(OPENIM_KAFKA).exists()
                && found("etcd")
                && found("java")
                && Path::new(REDIS_SERVER).exists()
                && postgres_bin().is_some(),
        ),
    ]
}

/// What changes when a peer is installed or removed, all existing paths (`root`: the
/// repository): the program directories (Debian's packages of ejabberd, Prosody,
/// redis-server and node each put a program into `/usr/bin` or `/usr/sbin`; PostgreSQL's
/// folder), and for a
/// peer in the repository its files, or while they are missing the nearest folder of its
/// own they would appear in.
pub fn watched(root: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = program_dirs()
        .into_iter()
        .chain([
            PathBuf::from("/usr/local/bin"),
            PathBuf::from("/usr/lib/postgresql"),
        ])
        .filter(|d| d.is_absolute() && d.is_dir())
        .collect();
    for (peer, files) in [
        ("peers/socketio", SOCKETIO_MODULES),
        ("peers/socketcluster", SOCKETCLUSTER_MODULES),
        ("peers/centrifuge", CENTRIFUGE),
        ("peers/netty-worldclock", NETTY_CLASSPATH),
        ("peers/tinode", TINODE),
        ("peers/synapse", SYNAPSE),
        ("peers/openim", OPENIM),
        ("peers/openim", OPENIM_KAFKA),
    ] {
        let (peer, mut path) = (root.join(peer), root.join(files));
        while !path.exists() && path != peer && path.pop() {}
        if path.exists() {
            paths.push(path);
        }
    }
    paths.sort();
    paths.dedup();
    paths
}
