//! What each role may do: one permission per kind of operation and one
//! role → permission table. The operations core is the only caller of
//! [`granted`]; `GET /v1/me` shows a caller its permissions, and the page
//! uses them instead of a role list of its own.

use cubicle_runtime::tokens::Role;
use serde::Serialize;

/// One kind of operation a token may be allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// List and read workspaces, see who holds control.
    WorkspacesView,
    /// Create workspaces (owned by the creating token).
    WorkspacesCreate,
    /// Start, stop and delete workspaces.
    WorkspacesManage,
    /// Screenshots and the live view.
    ScreenView,
    /// Computer-use input: pointer, keys, typing.
    Input,
    /// Run commands.
    Exec,
    /// Read and list files.
    FilesRead,
    /// Write and delete files.
    FilesWrite,
    /// The CDP proxy to the workspace's browser.
    Browser,
    /// Take over a workspace's controls and hand them back.
    ControlHold,
    /// Hand back control another operator holds.
    ControlOverride,
    /// Read the event log.
    EventsRead,
    /// Make, list and revoke tokens.
    TokensManage,
    /// Approve or deny operations a policy held (never the asking token's own).
    ApprovalsDecide,
    /// Ask a person to confirm a step the agent is about to take (a model
    /// provider's safety check): an approval with nothing held behind it.
    ApprovalsAsk,
    /// Switch the policy a workspace runs under, or choose at create
    /// another than the default (or its template's).
    PolicySwitch,
    /// Replay recordings and export a workspace's sealed audit record
    /// (deleted workspaces' too).
    AuditExport,
    /// List and read held downloads' records.
    DownloadsRead,
    /// Fetch a held download's content.
    DownloadsContent,
    /// Release a held download into its workspace, or reject it.
    DownloadsDecide,
    /// Change a workspace's egress policy, or give it at create one wider
    /// than the server's default (or its template's).
    EgressManage,
    /// Turn a workspace's screen recording off (at create).
    RecordingManage,
    /// Give a workspace at create more resources (memory, CPUs, tasks,
    /// disk) or more time (TTL, idle timeout, what expiry does) than the
    /// server's defaults (or its template's).
    LimitsManage,
    /// Subscribe webhooks to the events the token may see, list and remove
    /// its own (admins: everyone's).
    WebhooksManage,
    /// Read and set the desktop's clipboard.
    Clipboard,
    /// Store host-bound secrets, give them to workspaces as placeholders,
    /// list and remove its own (admins: everyone's).
    SecretsManage,
    /// Make, list and revoke a workspace's share links.
    SharesManage,
}

impl Permission {
    pub const ALL: [Self; 27] = [
        Self::WorkspacesView,
        Self::WorkspacesCreate,
        Self::WorkspacesManage,
        Self::ScreenView,
        Self::Input,
        Self::Exec,
        Self::FilesRead,
        Self::FilesWrite,
        Self::Browser,
        Self::ControlHold,
        Self::ControlOverride,
        Self::EventsRead,
        Self::TokensManage,
        Self::AuditExport,
        Self::ApprovalsDecide,
        Self::ApprovalsAsk,
        Self::PolicySwitch,
        Self::DownloadsRead,
        Self::DownloadsContent,
        Self::DownloadsDecide,
        Self::EgressManage,
        Self::RecordingManage,
        Self::LimitsManage,
        Self::WebhooksManage,
        Self::Clipboard,
        Self::SecretsManage,
        Self::SharesManage,
    ];

    /// What it lets a caller do, for refusals ("a token with role auditor
    /// cannot run commands").
    pub fn action(self) -> &'static str {
        match self {
            Self::WorkspacesView => "see workspaces",
            Self::WorkspacesCreate => "create workspaces",
            Self::WorkspacesManage => "start, stop or delete workspaces",
            Self::ScreenView => "see a workspace's screen",
            Self::Input => "drive a workspace (pointer, keys, typing)",
            Self::Exec => "run commands in workspaces",
            Self::FilesRead => "read workspace files",
            Self::FilesWrite => "write or delete workspace files",
            Self::Browser => "use a workspace's browser",
            Self::ControlHold => "take or hand back control",
            Self::ControlOverride => "hand back control another operator holds",
            Self::EventsRead => "read the event log",
            Self::TokensManage => "manage tokens",
            Self::ApprovalsDecide => "approve or deny held operations",
            Self::ApprovalsAsk => "ask a person to confirm a step",
            Self::PolicySwitch => "switch a workspace's policy",
            Self::AuditExport => "replay recordings or export the audit record",
            Self::DownloadsRead => "see held downloads",
            Self::DownloadsContent => "fetch a held download's content",
            Self::DownloadsDecide => "release or reject held downloads",
            Self::EgressManage => "change a workspace's egress policy",
            Self::RecordingManage => "turn a workspace's recording off",
            Self::LimitsManage => "give a workspace more resources or time than the defaults",
            Self::WebhooksManage => "subscribe webhooks to events",
            Self::Clipboard => "read or set a workspace's clipboard",
            Self::SecretsManage => "store secrets or give them to workspaces",
            Self::SharesManage => "make or revoke share links",
        }
    }
}

/// The table: whether `role` has `permission`.
pub fn granted(role: Role, permission: Permission) -> bool {
    use Permission as P;
    match role {
        Role::Admin => true,
        Role::Operator => !matches!(
            permission,
            P::TokensManage | P::ControlOverride | P::AuditExport
        ),
        Role::Agent => matches!(
            permission,
            P::WorkspacesView
                | P::WorkspacesCreate
                | P::WorkspacesManage
                | P::ScreenView
                | P::Input
                | P::Exec
                | P::FilesRead
                | P::FilesWrite
                | P::Browser
                | P::DownloadsRead
                | P::ApprovalsAsk
                | P::WebhooksManage
                | P::Clipboard
        ),
        Role::Auditor => matches!(
            permission,
            P::WorkspacesView
                | P::ScreenView
                | P::EventsRead
                | P::AuditExport
                | P::DownloadsRead
                | P::WebhooksManage
        ),
        // A share link's person: the one workspace's screen; in control
        // mode also its controls, so its input reaches the desktop only
        // once they have taken them (never through the agent's doors).
        Role::Viewer => matches!(permission, P::WorkspacesView | P::ScreenView),
        Role::Guest => matches!(
            permission,
            P::WorkspacesView | P::ScreenView | P::ControlHold
        ),
    }
}

/// Every permission `role` has, in [`Permission::ALL`] order.
pub fn of_role(role: Role) -> Vec<Permission> {
    Permission::ALL
        .into_iter()
        .filter(|&p| granted(role, p))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Permission as P;

    #[test]
    fn the_table() {
        assert_eq!(of_role(Role::Admin).len(), Permission::ALL.len());
        assert_eq!(of_role(Role::Operator).len(), Permission::ALL.len() - 3);
        assert!(!granted(Role::Operator, P::TokensManage));
        assert!(!granted(Role::Operator, P::ControlOverride));
        assert_eq!(
            of_role(Role::Auditor),
            [
                P::WorkspacesView,
                P::ScreenView,
                P::EventsRead,
                P::AuditExport,
                P::DownloadsRead,
                P::WebhooksManage
            ]
        );
        for p in [
            P::ControlHold,
            P::ControlOverride,
            P::EventsRead,
            P::TokensManage,
            P::AuditExport,
            P::DownloadsContent,
            P::DownloadsDecide,
            P::EgressManage,
            P::PolicySwitch,
            P::RecordingManage,
            P::LimitsManage,
            P::SecretsManage,
        ] {
            assert!(!granted(Role::Agent, p), "agent must not {}", p.action());
        }
        // Who may choose wider guard rails at create: operators and admins.
        for p in [
            P::EgressManage,
            P::PolicySwitch,
            P::RecordingManage,
            P::LimitsManage,
        ] {
            assert!(granted(Role::Operator, p) && granted(Role::Admin, p));
        }
        assert_eq!(of_role(Role::Viewer), [P::WorkspacesView, P::ScreenView]);
        assert_eq!(
            of_role(Role::Guest),
            [P::WorkspacesView, P::ScreenView, P::ControlHold]
        );
        assert!(!granted(Role::Agent, P::SharesManage));
        for p in [
            P::Input,
            P::Exec,
            P::FilesWrite,
            P::Browser,
            P::WorkspacesCreate,
        ] {
            assert!(granted(Role::Agent, p));
            assert!(
                !granted(Role::Auditor, p),
                "auditor must not {}",
                p.action()
            );
        }
    }
}
