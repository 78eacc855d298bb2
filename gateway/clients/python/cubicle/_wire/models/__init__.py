"""Contains all the data models used in inputs/outputs"""

from .action_request import ActionRequest
from .action_request_action import ActionRequestAction
from .action_request_type import ActionRequestType
from .action_response import ActionResponse
from .approval_state_filter import ApprovalStateFilter
from .ask import Ask
from .ask_details_type_0 import AskDetailsType0
from .bind_secret import BindSecret
from .binding_view import BindingView
from .clipboard_text import ClipboardText
from .create_failure import CreateFailure
from .create_workspace import CreateWorkspace
from .create_workspace_geometry_type_1_type_0 import CreateWorkspaceGeometryType1Type0
from .create_workspace_limits_type_1 import CreateWorkspaceLimitsType1
from .created_many import CreatedMany
from .decide import Decide
from .decision import Decision
from .described_body import DescribedBody
from .download_list import DownloadList
from .download_state_filter import DownloadStateFilter
from .download_view import DownloadView
from .egress_body import EgressBody
from .egress_view import EgressView
from .egress_view_policy import EgressViewPolicy
from .error_body import ErrorBody
from .error_detail import ErrorDetail
from .exec_body import ExecBody
from .exec_body_env import ExecBodyEnv
from .exec_result import ExecResult
from .fill_secret import FillSecret
from .filled import Filled
from .handoff import Handoff
from .hit_view import HitView
from .image_format import ImageFormat
from .machine_view import MachineView
from .new_secret import NewSecret
from .new_share import NewShare
from .new_snapshot import NewSnapshot
from .new_token import NewToken
from .new_webhook import NewWebhook
from .on_expiry_body import OnExpiryBody
from .profile_view import ProfileView
from .recording_list import RecordingList
from .recording_summary import RecordingSummary
from .recording_view import RecordingView
from .role_name import RoleName
from .rollback import Rollback
from .scope import Scope
from .scroll_direction import ScrollDirection
from .secret_view import SecretView
from .segment_view import SegmentView
from .set_policy import SetPolicy
from .share_mode import ShareMode
from .share_opened import ShareOpened
from .share_view import ShareView
from .snapshot_view import SnapshotView
from .time_limits_body import TimeLimitsBody
from .time_limits_view import TimeLimitsView
from .timeline_event import TimelineEvent
from .uploaded import Uploaded
from .webhook_view import WebhookView
from .webhook_view_last_type_0 import WebhookViewLastType0
from .workspace_list import WorkspaceList
from .workspace_view import WorkspaceView
from .workspace_view_call_type_0 import WorkspaceViewCallType0
from .workspace_view_geometry_type_0 import WorkspaceViewGeometryType0
from .workspace_view_limits import WorkspaceViewLimits
from .workspace_view_links import WorkspaceViewLinks
from .workspace_view_usage_type_0 import WorkspaceViewUsageType0

__all__ = (
    "ActionRequest",
    "ActionRequestAction",
    "ActionRequestType",
    "ActionResponse",
    "ApprovalStateFilter",
    "Ask",
    "AskDetailsType0",
    "BindSecret",
    "BindingView",
    "ClipboardText",
    "CreateFailure",
    "CreateWorkspace",
    "CreateWorkspaceGeometryType1Type0",
    "CreateWorkspaceLimitsType1",
    "CreatedMany",
    "Decide",
    "Decision",
    "DescribedBody",
    "DownloadList",
    "DownloadStateFilter",
    "DownloadView",
    "EgressBody",
    "EgressView",
    "EgressViewPolicy",
    "ErrorBody",
    "ErrorDetail",
    "ExecBody",
    "ExecBodyEnv",
    "ExecResult",
    "FillSecret",
    "Filled",
    "Handoff",
    "HitView",
    "ImageFormat",
    "MachineView",
    "NewSecret",
    "NewShare",
    "NewSnapshot",
    "NewToken",
    "NewWebhook",
    "OnExpiryBody",
    "ProfileView",
    "RecordingList",
    "RecordingSummary",
    "RecordingView",
    "RoleName",
    "Rollback",
    "Scope",
    "ScrollDirection",
    "SecretView",
    "SegmentView",
    "SetPolicy",
    "ShareMode",
    "ShareOpened",
    "ShareView",
    "SnapshotView",
    "TimeLimitsBody",
    "TimeLimitsView",
    "TimelineEvent",
    "Uploaded",
    "WebhookView",
    "WebhookViewLastType0",
    "WorkspaceList",
    "WorkspaceView",
    "WorkspaceViewCallType0",
    "WorkspaceViewGeometryType0",
    "WorkspaceViewLimits",
    "WorkspaceViewLinks",
    "WorkspaceViewUsageType0",
)
