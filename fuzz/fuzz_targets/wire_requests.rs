//! Every request body type of the API (`gateway/src/wire/`): create
//! workspace (with its limits, egress and time limits), exec, token,
//! approval decision, policy switch, download decision, egress policy,
//! webhook, handoff, a secret and its binding, a share link, a snapshot
//! and a rollback.
#![no_main]

use cubicle_gateway::wire;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = wire::workspace::CreateWorkspace::parse(data);
    let _ = wire::workspace::TemplateBody::parse(data);
    let _ = wire::exec::ExecBody::parse(data);
    let _ = wire::token::NewToken::parse(data);
    let _ = wire::approval::Decide::parse(data);
    let _ = wire::parse::<wire::approval::SetPolicy>(data);
    let _ = wire::download::Decision::parse(data);
    let _ = wire::egress::EgressBody::parse(data);
    let _ = wire::exec::text_and_bytes(data);
    let _ = wire::webhook::NewWebhook::parse(data);
    let _ = wire::parse::<wire::control::Handoff>(data);
    let _ = wire::secret::NewSecret::parse(data);
    let _ = wire::secret::BindSecret::parse(data);
    let _ = wire::secret::FillSecret::parse(data);
    let _ = wire::share::NewShare::parse(data);
    let _ = wire::snapshot::NewSnapshot::parse(data);
    let _ = wire::snapshot::Rollback::parse(data);
});
