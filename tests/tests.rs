//! The integration tests: one binary, one module per area. `common` is the shared fixture.

mod common;
// One set of cases run for every driver against its real peer.
mod conformance;

#[path = "echo/smoke.rs"]
mod echo_smoke;
#[path = "engine/send_lag.rs"]
mod engine_send_lag;
#[path = "formats/cli.rs"]
mod formats_cli;
#[path = "formats/junit.rs"]
mod formats_junit;
#[path = "formats/markdown.rs"]
mod formats_markdown;
#[path = "house/shape.rs"]
mod house_shape;
#[cfg(all(feature = "live", feature = "prometheus"))]
#[path = "live/grafana.rs"]
mod live_grafana;
#[cfg(all(feature = "live", feature = "prometheus"))]
#[path = "live/metrics.rs"]
mod live_metrics;
#[cfg(all(feature = "live", feature = "prometheus"))]
#[path = "live/page.rs"]
mod live_page;
#[cfg(all(feature = "live", feature = "prometheus"))]
#[path = "live/push.rs"]
mod live_push;
#[cfg(feature = "mqtt")]
#[path = "mqtt/delivery.rs"]
mod mqtt_delivery;
#[cfg(feature = "mqtt")]
#[path = "mqtt/failures.rs"]
mod mqtt_failures;
#[cfg(feature = "mqtt")]
#[path = "mqtt/keepalive.rs"]
mod mqtt_keepalive;
#[cfg(feature = "mqtt")]
#[path = "mqtt/offline.rs"]
mod mqtt_offline;
#[cfg(feature = "mqtt-tls")]
#[path = "mqtt/tls.rs"]
mod mqtt_tls;
#[cfg(feature = "prometheus")]
#[path = "scrape/prometheus.rs"]
mod scrape_prometheus;
// The XMPP tests run msgstorm with the runner of the MQTT fixture.
#[path = "serve/durability.rs"]
mod serve_durability;
#[path = "serve/faults.rs"]
mod serve_faults;
#[path = "serve/hostile.rs"]
mod serve_hostile;
#[path = "serve/limits.rs"]
mod serve_limits;
#[path = "serve/login.rs"]
mod serve_login;
#[path = "serve/messaging.rs"]
mod serve_messaging;
#[path = "serve/policy.rs"]
mod serve_policy;
#[path = "serve/rpc.rs"]
mod serve_rpc;
#[path = "serve/slow.rs"]
mod serve_slow;
#[cfg(all(feature = "xmpp", feature = "mqtt"))]
#[path = "xmpp/delivery.rs"]
mod xmpp_delivery;
#[cfg(all(feature = "xmpp", feature = "mqtt"))]
#[path = "xmpp/failures.rs"]
mod xmpp_failures;
#[cfg(all(feature = "xmpp", feature = "mqtt"))]
#[path = "xmpp/offline.rs"]
mod xmpp_offline;
#[cfg(all(feature = "xmpp", feature = "mqtt"))]
#[path = "xmpp/resume.rs"]
mod xmpp_resume;
#[cfg(all(feature = "xmpp", feature = "mqtt"))]
#[path = "xmpp/rooms.rs"]
mod xmpp_rooms;
#[cfg(all(feature = "xmpp", feature = "mqtt"))]
#[path = "xmpp/tls.rs"]
mod xmpp_tls;

#[path = "compare/cli.rs"]
mod compare_cli;
#[path = "html/browser.rs"]
mod html_browser;

#[path = "cli/blame.rs"]
mod cli_blame;
#[path = "cli/delivery.rs"]
mod cli_delivery;
#[path = "cli/drivers.rs"]
mod cli_drivers;
#[path = "cli/exit_codes.rs"]
mod cli_exit_codes;
#[path = "cli/faults.rs"]
mod cli_faults;
#[path = "cli/flow.rs"]
mod cli_flow;
#[path = "cli/promise.rs"]
mod cli_promise;
#[path = "cli/report.rs"]
mod cli_report;
#[path = "cli/shards.rs"]
mod cli_shards;
#[path = "cli/signals.rs"]
mod cli_signals;
#[path = "cli/verdict.rs"]
mod cli_verdict;
#[cfg(feature = "tls")]
#[path = "cli/wss.rs"]
mod cli_wss;
#[path = "k8s/apply.rs"]
mod k8s_apply;
#[path = "k8s/clock.rs"]
mod k8s_clock;
#[path = "k8s/job.rs"]
mod k8s_job;
#[path = "k8s/kubelet.rs"]
mod k8s_kubelet;
#[path = "run/library.rs"]
mod run_library;

#[path = "chaos/aftermath.rs"]
mod chaos_aftermath;
#[cfg(feature = "mqtt")]
#[path = "chaos/mosquitto.rs"]
mod chaos_mosquitto;
#[path = "chaos/process.rs"]
mod chaos_process;
#[cfg(feature = "socketio")]
#[path = "chaos/socketio.rs"]
mod chaos_socketio;
#[path = "chaos/steps.rs"]
mod chaos_steps;
#[path = "chaos/validate.rs"]
mod chaos_validate;
#[cfg(feature = "script")]
#[path = "script/native.rs"]
mod script_native;
#[cfg(feature = "script")]
#[path = "script/netty.rs"]
mod script_netty;
#[cfg(all(feature = "script", feature = "socketio"))]
#[path = "script/socketio.rs"]
mod script_socketio;
#[cfg(feature = "script")]
#[path = "script/tinode.rs"]
mod script_tinode;
#[path = "ws_json/centrifuge.rs"]
mod ws_json_centrifuge;
#[path = "ws_json/native.rs"]
mod ws_json_native;
#[path = "ws_json/options.rs"]
mod ws_json_options;
#[path = "ws_json/peer.rs"]
mod ws_json_peer;
#[path = "ws_json/socketcluster.rs"]
mod ws_json_socketcluster;
#[path = "ws_json/sync.rs"]
mod ws_json_sync;

#[cfg(feature = "socketio")]
#[path = "socketio/chat.rs"]
mod socketio_chat;
#[cfg(feature = "socketio")]
#[path = "socketio/failures.rs"]
mod socketio_failures;
#[cfg(feature = "socketio")]
#[path = "socketio/recovery.rs"]
mod socketio_recovery;

#[path = "find/capacity.rs"]
mod find_capacity;

#[path = "find/sizing.rs"]
mod find_sizing;
#[path = "workloads/w3.rs"]
mod workloads_w3;
