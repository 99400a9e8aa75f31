//! Kafka ACLs: create, describe and delete them through librdkafka's C admin API.
//!
//! rdkafka 0.39's `AdminClient` has no ACL calls, so this module drives `rd_kafka_CreateAcls`,
//! `rd_kafka_DescribeAcls` and `rd_kafka_DeleteAcls` from rdkafka-sys (re-exported as
//! `rdkafka::bindings`) on the admin client's own `rd_kafka_t`. It is the one module of the
//! workspace allowed `unsafe`; everything it exports is safe.
//!
//! How the FFI is kept honest:
//! - every object librdkafka hands us (binding, filter, admin options, queue, event) lives in an
//!   [`Owned`], whose `Drop` calls the matching `*_destroy` exactly once;
//! - every C string we pass is a [`CString`] (a NUL inside a name is refused, not truncated) that
//!   outlives the call; librdkafka `strdup()`s them;
//! - every pointer librdkafka returns is checked for null before use, and borrowed results
//!   (names, arrays, per-item errors) are copied into Rust values while the event that owns
//!   them is still alive;
//! - each request gets a fresh queue (`rd_kafka_queue_new`) that only this call polls, so the
//!   answer cannot be taken by `AdminClient`'s own polling thread;
//! - each `unsafe` block states its invariant in a `// SAFETY:` comment (enforced by clippy's
//!   `undocumented_unsafe_blocks` below).
//!
//! `lib.rs` allows `unsafe_code` for this module only (`#[allow(unsafe_code)] mod kafka_acl`); the
//! ACL types it sends and returns are plain data in [`crate::acl`].
//! Covered by `tests::create_describe_delete_against_the_real_brokers` (ignored unless run
//! against the stack; see that test for the command line).
#![warn(
    clippy::undocumented_unsafe_blocks,
    clippy::multiple_unsafe_ops_per_block
)]

use std::ffi::{CStr, CString, c_char, c_int};
use std::ptr::{self, NonNull};
use std::time::{Duration, Instant};

use crate::acl::{AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType};
use crate::error::AgentError;
use rdkafka::admin::AdminClient;
use rdkafka::bindings as rd;
use rdkafka::client::ClientContext;
/// Creates the ACLs. Creating one that exists already succeeds (Kafka treats it as a no-op).
///
/// # Errors
/// [`AgentError::InvalidAcl`] before anything is sent if a binding cannot be built (a NUL in a
/// string, an `Unknown` field); [`AgentError::KafkaAcl`] if the request fails or the cluster
/// refuses any binding (the others may have been created: Kafka's CreateAcls is per binding).
pub fn create_acls<C: ClientContext>(
    client: &AdminClient<C>,
    bindings: &[AclBinding],
    timeout: Duration,
) -> Result<(), AgentError> {
    if bindings.is_empty() {
        return Ok(());
    }
    let natives = bindings
        .iter()
        .map(native_binding)
        .collect::<Result<Vec<_>, _>>()?;
    let mut array: Vec<*mut rd::rd_kafka_AclBinding_t> = natives.iter().map(Owned::ptr).collect();
    let request = Api::Create.name();
    let reply = Reply::wait_for(client, Api::Create, timeout, None, |rk, options, queue| {
        // SAFETY: `rk` is the live handle of `client`; `array` holds `array.len()` live
        // bindings owned by `natives` (librdkafka copies them before returning:
        // rdkafka_admin.c `rd_kafka_CreateAcls` → `rd_kafka_AclBinding_copy`); `options`
        // and `queue` are live objects owned by `Reply::wait_for` for the whole request.
        unsafe { rd::rd_kafka_CreateAcls(rk, array.as_mut_ptr(), array.len(), options, queue) }
    })?;
    // SAFETY: `reply.event` is a live event whose type `wait_for` checked to be
    // RD_KAFKA_EVENT_CREATEACLS_RESULT; the result is the event itself, borrowed.
    let result = unsafe { rd::rd_kafka_event_CreateAcls_result(reply.event.ptr()) };
    if result.is_null() {
        return Err(no_result(request));
    }
    let mut count = 0usize;
    // SAFETY: `result` is non-null and lives as long as `reply`; `count` is a valid out pointer.
    let results = unsafe { rd::rd_kafka_CreateAcls_result_acls(result, &mut count) };
    // SAFETY: librdkafka returns `count` pointers to acl results owned by the event, which
    // `reply` keeps alive while the slice is in use (this function).
    let results = unsafe { borrowed_array(&reply, results.cast_const(), count) };
    let mut refused = Vec::new();
    // Kafka answers in request order (CreateAclsResponse); librdkafka keeps that order.
    for (i, &r) in results.iter().enumerate() {
        if r.is_null() {
            continue;
        }
        // SAFETY: `r` is a non-null acl result owned by the event (see above).
        let error = unsafe { rd::rd_kafka_acl_result_error(r) };
        // SAFETY: `error` is null or an error object owned by the same event.
        if let Some(e) = unsafe { KafkaErr::from_error(error) } {
            let what = bindings
                .get(i)
                .map_or_else(String::new, ToString::to_string);
            refused.push((e, what));
        }
    }
    if let Some((first, _)) = refused.first() {
        return Err(AgentError::KafkaAcl {
            request,
            code: first.code.clone(),
            why: refused
                .iter()
                .map(|(e, what)| format!("{what}: {}", e.message))
                .collect::<Vec<_>>()
                .join("; "),
        });
    }
    Ok(())
}

/// Every ACL matching the filter, sorted.
///
/// Gotcha: librdkafka 2.12.1 reads DescribeAcls' top-level error code and then drops it
/// (rdkafka_admin.c `rd_kafka_DescribeAclsResponse_parse`), so a caller without DESCRIBE on the
/// cluster gets an empty list here, not `CLUSTER_AUTHORIZATION_FAILED` (create and delete do
/// report it). Do not read "no ACLs" as proof of anything security-relevant.
///
/// # Errors
/// As [`create_acls`].
pub fn describe_acls<C: ClientContext>(
    client: &AdminClient<C>,
    filter: &AclFilter,
    timeout: Duration,
) -> Result<Vec<AclBinding>, AgentError> {
    describe_acls_on(client, filter, timeout, None)
}

/// As [`describe_acls`], answered by broker `broker` (by default librdkafka asks whichever
/// broker the metadata calls the controller). Each broker answers from its own copy of the
/// metadata, so this is how to learn that a change has reached every broker.
///
/// # Errors
/// As [`create_acls`].
pub fn describe_acls_on<C: ClientContext>(
    client: &AdminClient<C>,
    filter: &AclFilter,
    timeout: Duration,
    broker: Option<i32>,
) -> Result<Vec<AclBinding>, AgentError> {
    let native = native_filter(filter)?;
    let request = Api::Describe.name();
    let reply = Reply::wait_for(
        client,
        Api::Describe,
        timeout,
        broker,
        |rk, options, queue| {
            // SAFETY: `rk` is the live handle of `client`; `native` is a live filter we own
            // (librdkafka copies it: `rd_kafka_DescribeAcls` → `rd_kafka_AclBindingFilter_copy`);
            // `options` and `queue` are live for the whole request.
            unsafe { rd::rd_kafka_DescribeAcls(rk, native.ptr(), options, queue) }
        },
    )?;
    // SAFETY: `reply.event` is a live DESCRIBEACLS_RESULT event (checked by `wait_for`).
    let result = unsafe { rd::rd_kafka_event_DescribeAcls_result(reply.event.ptr()) };
    if result.is_null() {
        return Err(no_result(request));
    }
    let mut count = 0usize;
    // SAFETY: `result` is non-null and lives as long as `reply`; `count` is a valid out pointer.
    let acls = unsafe { rd::rd_kafka_DescribeAcls_result_acls(result, &mut count) };
    // SAFETY: `count` binding pointers owned by the event, alive while `reply` is.
    let acls = unsafe { borrowed_array(&reply, acls.cast_const(), count) };
    let mut out = Vec::with_capacity(acls.len());
    for &acl in acls {
        // SAFETY: `acl` is null or a binding owned by the event, alive while `reply` is.
        if let Some(b) = unsafe { read_binding(acl) } {
            out.push(b);
        }
    }
    out.sort();
    Ok(out)
}

/// Deletes every ACL matching any of the filters and returns what was deleted (sorted, each
/// once).
///
/// # Errors
/// As [`create_acls`]; a filter the cluster refused fails the call (the other filters' ACLs
/// may have been deleted).
pub fn delete_acls<C: ClientContext>(
    client: &AdminClient<C>,
    filters: &[AclFilter],
    timeout: Duration,
) -> Result<Vec<AclBinding>, AgentError> {
    if filters.is_empty() {
        return Ok(Vec::new());
    }
    let natives = filters
        .iter()
        .map(native_filter)
        .collect::<Result<Vec<_>, _>>()?;
    let mut array: Vec<*mut rd::rd_kafka_AclBindingFilter_t> =
        natives.iter().map(Owned::ptr).collect();
    let request = Api::Delete.name();
    let reply = Reply::wait_for(client, Api::Delete, timeout, None, |rk, options, queue| {
        // SAFETY: `rk` is the live handle of `client`; `array` holds `array.len()` live
        // filters owned by `natives` (copied by librdkafka: `rd_kafka_DeleteAcls` →
        // `rd_kafka_AclBindingFilter_copy`); `options` and `queue` are live.
        unsafe { rd::rd_kafka_DeleteAcls(rk, array.as_mut_ptr(), array.len(), options, queue) }
    })?;
    // SAFETY: `reply.event` is a live DELETEACLS_RESULT event (checked by `wait_for`).
    let result = unsafe { rd::rd_kafka_event_DeleteAcls_result(reply.event.ptr()) };
    if result.is_null() {
        return Err(no_result(request));
    }
    let mut count = 0usize;
    // SAFETY: `result` is non-null and lives as long as `reply`; `count` is a valid out pointer.
    let responses = unsafe { rd::rd_kafka_DeleteAcls_result_responses(result, &mut count) };
    // SAFETY: `count` response pointers owned by the event, alive while `reply` is.
    let responses = unsafe { borrowed_array(&reply, responses.cast_const(), count) };
    let mut deleted = Vec::new();
    let mut refused = Vec::new();
    for &response in responses {
        if response.is_null() {
            continue;
        }
        // SAFETY: `response` is a non-null response owned by the event.
        let error = unsafe { rd::rd_kafka_DeleteAcls_result_response_error(response) };
        // SAFETY: `error` is null or an error object owned by the event.
        if let Some(e) = unsafe { KafkaErr::from_error(error) } {
            refused.push(e);
            continue;
        }
        let mut matching = 0usize;
        // SAFETY: `response` is live (owned by the event); `matching` is a valid out pointer.
        let acls = unsafe {
            rd::rd_kafka_DeleteAcls_result_response_matching_acls(response, &mut matching)
        };
        // SAFETY: `matching` binding pointers owned by the response, alive while `reply` is.
        let acls = unsafe { borrowed_array(&reply, acls.cast_const(), matching) };
        for &acl in acls {
            if acl.is_null() {
                continue;
            }
            // SAFETY: `acl` is a non-null binding owned by the event.
            let error = unsafe { rd::rd_kafka_AclBinding_error(acl) };
            // SAFETY: `error` is null or an error object owned by the same binding.
            if let Some(e) = unsafe { KafkaErr::from_error(error) } {
                refused.push(e);
                continue;
            }
            // SAFETY: `acl` is a non-null binding owned by the event.
            if let Some(b) = unsafe { read_binding(acl) } {
                deleted.push(b);
            }
        }
    }
    if let Some(first) = refused.first() {
        return Err(AgentError::KafkaAcl {
            request,
            code: first.code.clone(),
            why: refused
                .iter()
                .map(|e| e.message.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        });
    }
    deleted.sort();
    deleted.dedup();
    Ok(deleted)
}

// -------------------------------------------------------------------------------------------
// The FFI below this line. Nothing here is public.
// -------------------------------------------------------------------------------------------

impl ResourceType {
    fn to_native(self) -> Option<rd::rd_kafka_ResourceType_t> {
        use rd::rd_kafka_ResourceType_t::*;
        Some(match self {
            Self::Topic => RD_KAFKA_RESOURCE_TOPIC,
            Self::Group => RD_KAFKA_RESOURCE_GROUP,
            // librdkafka's BROKER is the wire value 4, which Kafka's ACLs call CLUSTER.
            Self::Cluster => RD_KAFKA_RESOURCE_BROKER,
            Self::TransactionalId => RD_KAFKA_RESOURCE_TRANSACTIONAL_ID,
            Self::Unknown => return None,
        })
    }

    fn from_native(t: rd::rd_kafka_ResourceType_t) -> Self {
        use rd::rd_kafka_ResourceType_t::*;
        match t {
            RD_KAFKA_RESOURCE_TOPIC => Self::Topic,
            RD_KAFKA_RESOURCE_GROUP => Self::Group,
            RD_KAFKA_RESOURCE_BROKER => Self::Cluster,
            RD_KAFKA_RESOURCE_TRANSACTIONAL_ID => Self::TransactionalId,
            _ => Self::Unknown,
        }
    }
}

impl PatternType {
    fn to_native(self) -> Option<rd::rd_kafka_ResourcePatternType_t> {
        use rd::rd_kafka_ResourcePatternType_t::*;
        Some(match self {
            Self::Literal => RD_KAFKA_RESOURCE_PATTERN_LITERAL,
            Self::Prefixed => RD_KAFKA_RESOURCE_PATTERN_PREFIXED,
            Self::Unknown => return None,
        })
    }

    fn from_native(t: rd::rd_kafka_ResourcePatternType_t) -> Self {
        use rd::rd_kafka_ResourcePatternType_t::*;
        match t {
            RD_KAFKA_RESOURCE_PATTERN_LITERAL => Self::Literal,
            RD_KAFKA_RESOURCE_PATTERN_PREFIXED => Self::Prefixed,
            _ => Self::Unknown,
        }
    }
}

impl Operation {
    fn to_native(self) -> Option<rd::rd_kafka_AclOperation_t> {
        use rd::rd_kafka_AclOperation_t::*;
        Some(match self {
            Self::All => RD_KAFKA_ACL_OPERATION_ALL,
            Self::Read => RD_KAFKA_ACL_OPERATION_READ,
            Self::Write => RD_KAFKA_ACL_OPERATION_WRITE,
            Self::Create => RD_KAFKA_ACL_OPERATION_CREATE,
            Self::Delete => RD_KAFKA_ACL_OPERATION_DELETE,
            Self::Alter => RD_KAFKA_ACL_OPERATION_ALTER,
            Self::Describe => RD_KAFKA_ACL_OPERATION_DESCRIBE,
            Self::ClusterAction => RD_KAFKA_ACL_OPERATION_CLUSTER_ACTION,
            Self::DescribeConfigs => RD_KAFKA_ACL_OPERATION_DESCRIBE_CONFIGS,
            Self::AlterConfigs => RD_KAFKA_ACL_OPERATION_ALTER_CONFIGS,
            Self::IdempotentWrite => RD_KAFKA_ACL_OPERATION_IDEMPOTENT_WRITE,
            Self::Unknown => return None,
        })
    }

    fn from_native(op: rd::rd_kafka_AclOperation_t) -> Self {
        use rd::rd_kafka_AclOperation_t::*;
        match op {
            RD_KAFKA_ACL_OPERATION_ALL => Self::All,
            RD_KAFKA_ACL_OPERATION_READ => Self::Read,
            RD_KAFKA_ACL_OPERATION_WRITE => Self::Write,
            RD_KAFKA_ACL_OPERATION_CREATE => Self::Create,
            RD_KAFKA_ACL_OPERATION_DELETE => Self::Delete,
            RD_KAFKA_ACL_OPERATION_ALTER => Self::Alter,
            RD_KAFKA_ACL_OPERATION_DESCRIBE => Self::Describe,
            RD_KAFKA_ACL_OPERATION_CLUSTER_ACTION => Self::ClusterAction,
            RD_KAFKA_ACL_OPERATION_DESCRIBE_CONFIGS => Self::DescribeConfigs,
            RD_KAFKA_ACL_OPERATION_ALTER_CONFIGS => Self::AlterConfigs,
            RD_KAFKA_ACL_OPERATION_IDEMPOTENT_WRITE => Self::IdempotentWrite,
            _ => Self::Unknown,
        }
    }
}

impl Permission {
    fn to_native(self) -> Option<rd::rd_kafka_AclPermissionType_t> {
        use rd::rd_kafka_AclPermissionType_t::*;
        Some(match self {
            Self::Allow => RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW,
            Self::Deny => RD_KAFKA_ACL_PERMISSION_TYPE_DENY,
            Self::Unknown => return None,
        })
    }

    fn from_native(p: rd::rd_kafka_AclPermissionType_t) -> Self {
        use rd::rd_kafka_AclPermissionType_t::*;
        match p {
            RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW => Self::Allow,
            RD_KAFKA_ACL_PERMISSION_TYPE_DENY => Self::Deny,
            _ => Self::Unknown,
        }
    }
}

// -------------------------------------------------------------------------------------------
// librdkafka objects and results.
// -------------------------------------------------------------------------------------------

/// A librdkafka object type and the function that frees it.
trait Destroy {
    /// Frees `ptr`.
    ///
    /// # Safety
    /// `ptr` is a live object of this type that nothing else will use or free afterwards.
    unsafe fn destroy(ptr: *mut Self);
}

macro_rules! destroy_with {
    ($($t:ty => $f:path),* $(,)?) => {$(
        impl Destroy for $t {
            unsafe fn destroy(ptr: *mut Self) {
                // SAFETY: forwarded from the trait's contract.
                unsafe { $f(ptr) }
            }
        }
    )*};
}
// `rd_kafka_AclBindingFilter_t` is a typedef of `rd_kafka_AclBinding_t`, and rdkafka.h says to
// destroy filters with `rd_kafka_AclBinding_destroy` too.
destroy_with! {
    rd::rd_kafka_AclBinding_t => rd::rd_kafka_AclBinding_destroy,
    rd::rd_kafka_AdminOptions_t => rd::rd_kafka_AdminOptions_destroy,
    rd::rd_kafka_queue_t => rd::rd_kafka_queue_destroy,
    rd::rd_kafka_event_t => rd::rd_kafka_event_destroy,
}

/// Sole ownership of one librdkafka object; `Drop` frees it exactly once.
struct Owned<T: Destroy>(NonNull<T>);

impl<T: Destroy> Owned<T> {
    /// Takes ownership of `ptr`, or `None` if it is null.
    ///
    /// # Safety
    /// `ptr` is null, or a live object of type `T` that the caller owns and hands over: nothing
    /// else frees it.
    unsafe fn take(ptr: *mut T) -> Option<Self> {
        NonNull::new(ptr).map(Self)
    }

    fn ptr(&self) -> *mut T {
        self.0.as_ptr()
    }
}

impl<T: Destroy> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: `take`'s contract: we own this live object, and `drop` runs once.
        unsafe { T::destroy(self.0.as_ptr()) }
    }
}

/// The admin requests this module makes.
#[derive(Clone, Copy)]
enum Api {
    Create,
    Describe,
    Delete,
}

impl Api {
    fn name(self) -> &'static str {
        match self {
            Self::Create => "CreateAcls",
            Self::Describe => "DescribeAcls",
            Self::Delete => "DeleteAcls",
        }
    }

    fn op(self) -> rd::rd_kafka_admin_op_t {
        use rd::rd_kafka_admin_op_t::*;
        match self {
            Self::Create => RD_KAFKA_ADMIN_OP_CREATEACLS,
            Self::Describe => RD_KAFKA_ADMIN_OP_DESCRIBEACLS,
            Self::Delete => RD_KAFKA_ADMIN_OP_DELETEACLS,
        }
    }

    fn event_type(self) -> rd::rd_kafka_event_type_t {
        match self {
            Self::Create => rd::RD_KAFKA_EVENT_CREATEACLS_RESULT,
            Self::Describe => rd::RD_KAFKA_EVENT_DESCRIBEACLS_RESULT,
            Self::Delete => rd::RD_KAFKA_EVENT_DELETEACLS_RESULT,
        }
    }
}

/// A request's result event. The queue it arrived on is kept until the event is gone (fields
/// drop in declaration order: event first).
struct Reply {
    event: Owned<rd::rd_kafka_event_t>,
    _queue: Owned<rd::rd_kafka_queue_t>,
}

impl Reply {
    /// Makes the admin options and a private queue, lets `submit` send the request with them,
    /// and waits for its result event: a request timeout of `timeout` is set in the options,
    /// librdkafka then answers with `_TIMED_OUT` itself; we give up a little later than that.
    ///
    /// A result carrying a request-level error becomes [`AgentError::KafkaAcl`]. `broker`
    /// sends the request to that broker id instead of the controller.
    fn wait_for<C: ClientContext>(
        client: &AdminClient<C>,
        api: Api,
        timeout: Duration,
        broker: Option<i32>,
        submit: impl FnOnce(
            *mut rd::rd_kafka_t,
            *const rd::rd_kafka_AdminOptions_t,
            *mut rd::rd_kafka_queue_t,
        ),
    ) -> Result<Self, AgentError> {
        let request = api.name();
        let rk = client.inner().native_ptr();
        // SAFETY: `rk` is the live handle of `client`, which the borrow keeps alive for this
        // whole function (so longer than the queue, which is destroyed first: see `Reply`).
        let queue = unsafe { rd::rd_kafka_queue_new(rk) };
        // SAFETY: a non-null queue from `rd_kafka_queue_new` is ours to destroy.
        let queue = unsafe { Owned::take(queue) }.ok_or_else(|| failed(request, "no queue"))?;
        // SAFETY: `rk` is live (above); `api.op()` is a valid admin op.
        let options = unsafe { rd::rd_kafka_AdminOptions_new(rk, api.op()) };
        // SAFETY: non-null options from `rd_kafka_AdminOptions_new` are ours to destroy.
        let options =
            unsafe { Owned::take(options) }.ok_or_else(|| failed(request, "no admin options"))?;
        let timeout_ms = c_int::try_from(timeout.as_millis())
            .unwrap_or(c_int::MAX)
            .max(1);
        let mut errstr = ErrBuf::new();
        // SAFETY: `options` is live; `errstr` is a writable buffer of `errstr.len()` bytes.
        let set = unsafe {
            rd::rd_kafka_AdminOptions_set_request_timeout(
                options.ptr(),
                timeout_ms,
                errstr.ptr(),
                errstr.len(),
            )
        };
        if set != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return Err(AgentError::KafkaAcl {
                request,
                code: code_name(set),
                why: errstr.text(),
            });
        }
        if let Some(id) = broker {
            // SAFETY: as for the request timeout above.
            let set = unsafe {
                rd::rd_kafka_AdminOptions_set_broker(options.ptr(), id, errstr.ptr(), errstr.len())
            };
            if set != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                return Err(AgentError::KafkaAcl {
                    request,
                    code: code_name(set),
                    why: errstr.text(),
                });
            }
        }

        submit(rk, options.ptr(), queue.ptr());

        // librdkafka reports its own timeout at `timeout`; the margin covers its scheduling.
        let deadline = Instant::now() + timeout + Duration::from_secs(5);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                // Dropping the queue with the request in flight is safe: librdkafka refcounts
                // it, and a late result sent to a destroyed (disabled) queue is freed by
                // librdkafka (rdkafka_queue.h `rd_kafka_q_enq1`).
                return Err(AgentError::KafkaAcl {
                    request,
                    code: "_TIMED_OUT".to_owned(),
                    why: format!("no answer within {} s", timeout.as_secs()),
                });
            }
            let wait_ms = c_int::try_from(left.as_millis().min(1000)).unwrap_or(1000);
            // SAFETY: `queue` is live and only this thread polls it.
            let event = unsafe { rd::rd_kafka_queue_poll(queue.ptr(), wait_ms) };
            // SAFETY: a non-null event from `rd_kafka_queue_poll` is ours to destroy.
            let Some(event) = (unsafe { Owned::take(event) }) else {
                continue;
            };
            // SAFETY: `event` is live.
            let kind = unsafe { rd::rd_kafka_event_type(event.ptr()) };
            if kind != api.event_type() {
                tracing::debug!(
                    request,
                    kind,
                    "ignoring an unexpected event on the ACL queue"
                );
                continue;
            }
            // SAFETY: `event` is live.
            let code = unsafe { rd::rd_kafka_event_error(event.ptr()) };
            if code != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                // SAFETY: `event` is live.
                let why = unsafe { rd::rd_kafka_event_error_string(event.ptr()) };
                // SAFETY: null or a string owned by `event`, which is alive; copied here.
                let why = unsafe { c_str(why) };
                return Err(AgentError::KafkaAcl {
                    request,
                    code: code_name(code),
                    why: why.unwrap_or_else(|| code_text(code)),
                });
            }
            return Ok(Self {
                event,
                _queue: queue,
            });
        }
    }
}

/// An error librdkafka attached to a result.
struct KafkaErr {
    code: String,
    message: String,
}

impl KafkaErr {
    /// Copies an `rd_kafka_error_t`; `None` for null (= success).
    ///
    /// # Safety
    /// `error` is null or a live error object that stays alive during this call.
    unsafe fn from_error(error: *const rd::rd_kafka_error_t) -> Option<Self> {
        if error.is_null() {
            return None;
        }
        // SAFETY: `error` is non-null and live (the caller's contract).
        let code = unsafe { rd::rd_kafka_error_code(error) };
        if code == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return None;
        }
        // SAFETY: as above.
        let message = unsafe { rd::rd_kafka_error_string(error) };
        // SAFETY: null or a string owned by `error`, which is alive; copied here.
        let message = unsafe { c_str(message) };
        Some(Self {
            code: code_name(code),
            message: message.unwrap_or_else(|| code_text(code)),
        })
    }
}

/// librdkafka's symbolic name for an error code (`CLUSTER_AUTHORIZATION_FAILED`).
fn code_name(code: rd::rd_kafka_resp_err_t) -> String {
    // SAFETY: `rd_kafka_err2name` accepts any code.
    let name = unsafe { rd::rd_kafka_err2name(code) };
    // SAFETY: null or a static string.
    unsafe { c_str(name) }.unwrap_or_else(|| format!("{}", code as i32))
}

/// librdkafka's description of an error code.
fn code_text(code: rd::rd_kafka_resp_err_t) -> String {
    // SAFETY: `rd_kafka_err2str` accepts any code.
    let text = unsafe { rd::rd_kafka_err2str(code) };
    // SAFETY: null or a static string.
    unsafe { c_str(text) }.unwrap_or_else(|| code_name(code))
}

fn no_result(request: &'static str) -> AgentError {
    failed(request, "no result object")
}

fn failed(request: &'static str, what: &str) -> AgentError {
    AgentError::KafkaAcl {
        request,
        code: "_FAIL".to_owned(),
        why: format!("librdkafka returned {what}"),
    }
}

/// A C string copied into a `String` (lossy for non-UTF-8); `None` for null.
///
/// # Safety
/// `p` is null or a NUL-terminated string that stays alive during this call.
unsafe fn c_str(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated by the caller's contract.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// A C array of pointers owned by `_owner`'s event, as a slice that cannot outlive it; empty
/// for null or zero length.
///
/// # Safety
/// `ptr` is null or points to `len` consecutive pointers owned by `_owner`'s event (so alive
/// and unchanged while it is).
unsafe fn borrowed_array<T>(_owner: &Reply, ptr: *const *const T, len: usize) -> &[*const T] {
    if ptr.is_null() || len == 0 {
        return &[];
    }
    // SAFETY: non-null, `len` initialised elements, alive for `'a` (the caller's contract);
    // pointers are plain data, any bit pattern is valid.
    unsafe { std::slice::from_raw_parts(ptr, len) }
}

/// Copies a binding read from a result; `None` for null.
///
/// # Safety
/// `acl` is null or a live binding that stays alive during this call.
unsafe fn read_binding(acl: *const rd::rd_kafka_AclBinding_t) -> Option<AclBinding> {
    if acl.is_null() {
        return None;
    }
    // The enum getters return librdkafka's stored values, which its response parsers clamp to
    // the enums' declared range (rdkafka_admin.c: "unknown acl operation %d" → UNKNOWN), so
    // they are valid values of the Rust enums generated from the same header.
    // SAFETY: `acl` is non-null and live (the caller's contract).
    let resource = ResourceType::from_native(unsafe { rd::rd_kafka_AclBinding_restype(acl) });
    // SAFETY: as above.
    let pattern = unsafe { rd::rd_kafka_AclBinding_resource_pattern_type(acl) };
    // SAFETY: as above.
    let operation = unsafe { rd::rd_kafka_AclBinding_operation(acl) };
    // SAFETY: as above.
    let permission = unsafe { rd::rd_kafka_AclBinding_permission_type(acl) };
    // SAFETY: as above.
    let name = unsafe { rd::rd_kafka_AclBinding_name(acl) };
    // SAFETY: as above.
    let principal = unsafe { rd::rd_kafka_AclBinding_principal(acl) };
    // SAFETY: as above.
    let host = unsafe { rd::rd_kafka_AclBinding_host(acl) };
    // SAFETY: null or a string owned by `acl` ("lifetime of the returned string is the same as
    // the acl", rdkafka.h), which is alive; copied here. The same holds for the two below.
    let name = unsafe { c_str(name) };
    // SAFETY: see above.
    let principal = unsafe { c_str(principal) };
    // SAFETY: see above.
    let host = unsafe { c_str(host) };
    Some(AclBinding {
        resource,
        name: name.unwrap_or_default(),
        pattern: PatternType::from_native(pattern),
        principal: principal.unwrap_or_default(),
        host: host.unwrap_or_default(),
        operation: Operation::from_native(operation),
        permission: Permission::from_native(permission),
    })
}

/// A binding for `rd_kafka_CreateAcls`.
fn native_binding(b: &AclBinding) -> Result<Owned<rd::rd_kafka_AclBinding_t>, AgentError> {
    let unknown = |field: &str| AgentError::InvalidAcl {
        why: format!("{field} is unknown in `{b}`"),
    };
    let resource = b
        .resource
        .to_native()
        .ok_or_else(|| unknown("the resource type"))?;
    let pattern = b
        .pattern
        .to_native()
        .ok_or_else(|| unknown("the pattern type"))?;
    let operation = b
        .operation
        .to_native()
        .ok_or_else(|| unknown("the operation"))?;
    let permission = b
        .permission
        .to_native()
        .ok_or_else(|| unknown("the permission"))?;
    let name = c_string("resource name", &b.name)?;
    let principal = c_string("principal", &b.principal)?;
    let host = c_string("host", &b.host)?;
    let mut errstr = ErrBuf::new();
    // SAFETY: the three strings are NUL-terminated and outlive the call (librdkafka strdup()s
    // them); the enum values are valid; `errstr` is a writable buffer of `errstr.len()` bytes.
    let ptr = unsafe {
        rd::rd_kafka_AclBinding_new(
            resource,
            name.as_ptr(),
            pattern,
            principal.as_ptr(),
            host.as_ptr(),
            operation,
            permission,
            errstr.ptr(),
            errstr.len(),
        )
    };
    // SAFETY: a non-null result of `rd_kafka_AclBinding_new` is a new binding we own.
    unsafe { Owned::take(ptr) }.ok_or_else(|| AgentError::InvalidAcl {
        why: format!("librdkafka refused `{b}`: {}", errstr.text()),
    })
}

/// A filter for `rd_kafka_DescribeAcls` / `rd_kafka_DeleteAcls`.
fn native_filter(f: &AclFilter) -> Result<Owned<rd::rd_kafka_AclBindingFilter_t>, AgentError> {
    let unknown = |field: &str| AgentError::InvalidAcl {
        why: format!("a filter cannot match an unknown {field}"),
    };
    let resource = match f.resource {
        None => rd::rd_kafka_ResourceType_t::RD_KAFKA_RESOURCE_ANY,
        Some(r) => r.to_native().ok_or_else(|| unknown("resource type"))?,
    };
    let pattern = match f.pattern {
        None => rd::rd_kafka_ResourcePatternType_t::RD_KAFKA_RESOURCE_PATTERN_ANY,
        Some(p) => p.to_native().ok_or_else(|| unknown("pattern type"))?,
    };
    let operation = match f.operation {
        None => rd::rd_kafka_AclOperation_t::RD_KAFKA_ACL_OPERATION_ANY,
        Some(o) => o.to_native().ok_or_else(|| unknown("operation"))?,
    };
    let permission = match f.permission {
        None => rd::rd_kafka_AclPermissionType_t::RD_KAFKA_ACL_PERMISSION_TYPE_ANY,
        Some(p) => p.to_native().ok_or_else(|| unknown("permission"))?,
    };
    let optional =
        |what: &str, s: &Option<String>| s.as_deref().map(|s| c_string(what, s)).transpose();
    let name = optional("resource name", &f.name)?;
    let principal = optional("principal", &f.principal)?;
    let host = optional("host", &f.host)?;
    let as_ptr = |s: &Option<CString>| s.as_ref().map_or(ptr::null(), |c| c.as_ptr());
    let mut errstr = ErrBuf::new();
    // SAFETY: each string is null (= any, allowed for filters by rdkafka.h) or NUL-terminated
    // and alive past the call (librdkafka strdup()s them); the enum values are valid;
    // `errstr` is a writable buffer of `errstr.len()` bytes.
    let ptr = unsafe {
        rd::rd_kafka_AclBindingFilter_new(
            resource,
            as_ptr(&name),
            pattern,
            as_ptr(&principal),
            as_ptr(&host),
            operation,
            permission,
            errstr.ptr(),
            errstr.len(),
        )
    };
    // SAFETY: a non-null result of `rd_kafka_AclBindingFilter_new` is a new filter we own.
    unsafe { Owned::take(ptr) }.ok_or_else(|| AgentError::InvalidAcl {
        why: format!("librdkafka refused the filter: {}", errstr.text()),
    })
}

fn c_string(what: &str, s: &str) -> Result<CString, AgentError> {
    CString::new(s).map_err(|_| AgentError::InvalidAcl {
        why: format!("the {what} {s:?} contains a NUL byte"),
    })
}

/// librdkafka's `errstr` out-parameter: zeroed, so it reads as an empty string if untouched.
struct ErrBuf([u8; 512]);

impl ErrBuf {
    fn new() -> Self {
        Self([0; 512])
    }

    fn ptr(&mut self) -> *mut c_char {
        self.0.as_mut_ptr().cast()
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn text(&self) -> String {
        // librdkafka writes with snprintf (always NUL-terminated within `len`); a buffer
        // without a NUL would still be read safely, as empty.
        CStr::from_bytes_until_nul(&self.0)
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(resource: ResourceType, name: &str, operation: Operation) -> AclBinding {
        AclBinding {
            resource,
            name: name.to_owned(),
            pattern: PatternType::Prefixed,
            principal: "User:saige".to_owned(),
            host: "*".to_owned(),
            operation,
            permission: Permission::Allow,
        }
    }

    #[test]
    fn config_spellings_match_serde_and_native_round_trips() {
        for r in ResourceType::KNOWN {
            let json = serde_json::to_string(&r).expect("serializes");
            assert_eq!(json, format!("\"{}\"", r.as_str()));
            assert_eq!(serde_json::from_str::<ResourceType>(&json).ok(), Some(r));
            assert_eq!(ResourceType::from_native(r.to_native().expect("known")), r);
        }
        for p in PatternType::KNOWN {
            let json = serde_json::to_string(&p).expect("serializes");
            assert_eq!(json, format!("\"{}\"", p.as_str()));
            assert_eq!(PatternType::from_native(p.to_native().expect("known")), p);
        }
        for o in Operation::KNOWN {
            let json = serde_json::to_string(&o).expect("serializes");
            assert_eq!(json, format!("\"{}\"", o.as_str()));
            assert_eq!(serde_json::from_str::<Operation>(&json).ok(), Some(o));
            assert_eq!(Operation::from_native(o.to_native().expect("known")), o);
        }
        for p in [Permission::Allow, Permission::Deny] {
            assert_eq!(Permission::from_native(p.to_native().expect("known")), p);
        }
        // `unknown` is for what the cluster reports, never for input.
        assert!(serde_json::from_str::<Operation>("\"unknown\"").is_err());
        assert!(serde_json::from_str::<ResourceType>("\"unknown\"").is_err());
        assert!(serde_json::from_str::<Operation>("\"any\"").is_err());
        assert_eq!(
            Operation::from_native(rd::rd_kafka_AclOperation_t::RD_KAFKA_ACL_OPERATION_ANY),
            Operation::Unknown
        );
    }

    #[test]
    fn a_native_binding_reads_back_unchanged() {
        let b = binding(ResourceType::Topic, "app.", Operation::DescribeConfigs);
        let native = native_binding(&b).expect("valid binding");
        // SAFETY: `native` is a live binding we own, alive during the call.
        let back = unsafe { read_binding(native.ptr()) };
        assert_eq!(back, Some(b));

        let cluster = AclBinding {
            pattern: PatternType::Literal,
            ..binding(
                ResourceType::Cluster,
                "kafka-cluster",
                Operation::IdempotentWrite,
            )
        };
        let native = native_binding(&cluster).expect("valid binding");
        // SAFETY: as above.
        assert_eq!(unsafe { read_binding(native.ptr()) }, Some(cluster));
    }

    #[test]
    fn nul_bytes_and_unknown_fields_are_refused_before_librdkafka() {
        let b = binding(ResourceType::Topic, "app.\0x", Operation::Read);
        let err = native_binding(&b).err().expect("refused");
        assert!(err.to_string().contains("NUL"), "{err}");
        let b = binding(ResourceType::Unknown, "app.", Operation::Read);
        assert!(matches!(
            native_binding(&b),
            Err(AgentError::InvalidAcl { .. })
        ));
        let f = AclFilter {
            principal: Some("User:\0".to_owned()),
            ..AclFilter::default()
        };
        assert!(matches!(
            native_filter(&f),
            Err(AgentError::InvalidAcl { .. })
        ));
    }

    #[test]
    fn filters_match_anything_or_exactly() {
        assert!(native_filter(&AclFilter::default()).is_ok());
        assert!(native_filter(&AclFilter::principal("User:saige")).is_ok());
        let exact = AclFilter::exact(&binding(ResourceType::Group, "app.", Operation::Read));
        assert!(native_filter(&exact).is_ok());
    }

    #[test]
    fn operations_per_resource_follow_kafka() {
        assert!(ResourceType::Group.operations().contains(&Operation::Read));
        assert!(!ResourceType::Group.operations().contains(&Operation::Write));
        assert!(
            ResourceType::Cluster
                .operations()
                .contains(&Operation::IdempotentWrite)
        );
        assert!(
            !ResourceType::Topic
                .operations()
                .contains(&Operation::IdempotentWrite)
        );
    }

    /// Create → describe → create again (idempotent) → delete → describe, against the running
    /// stack's brokers, as the stack's admin identity. Run it inside the server namespace:
    ///
    /// ```text
    /// ip netns exec shiqi-server env \
    ///   SHIQI_TEST_KAFKA_ADMIN_DIR=/var/lib/shiqi-stack/server/tls/shiqi-admin \
    ///   cargo test -p shiqi-ca-agent --lib kafka_acl -- --ignored
    /// ```
    ///
    /// `SHIQI_TEST_KAFKA_ADMIN_DIR` holds `ca.crt`, `client.crt`, `client.key` of a super user
    /// (`scripts/stack` writes them); `SHIQI_TEST_KAFKA_BOOTSTRAP` defaults to
    /// `localhost:19094`.
    #[test]
    #[ignore = "needs the running stack: see the doc comment for the command line"]
    fn create_describe_delete_against_the_real_brokers() {
        let dir = std::env::var("SHIQI_TEST_KAFKA_ADMIN_DIR")
            .expect("SHIQI_TEST_KAFKA_ADMIN_DIR must name the stack's admin TLS directory");
        let bootstrap = std::env::var("SHIQI_TEST_KAFKA_BOOTSTRAP")
            .unwrap_or_else(|_| "localhost:19094".to_owned());
        let admin: AdminClient<rdkafka::client::DefaultClientContext> =
            rdkafka::ClientConfig::new()
                .set("bootstrap.servers", &bootstrap)
                .set("security.protocol", "ssl")
                .set("ssl.ca.location", format!("{dir}/ca.crt"))
                .set("ssl.certificate.location", format!("{dir}/client.crt"))
                .set("ssl.key.location", format!("{dir}/client.key"))
                .set("ssl.endpoint.identification.algorithm", "https")
                .create()
                .expect("admin client");
        let timeout = Duration::from_secs(10);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let principal = format!("User:acl-test-{}-{nanos}", std::process::id());
        let mine = AclFilter::principal(&principal);
        let wanted = {
            let mut v = vec![
                AclBinding {
                    principal: principal.clone(),
                    ..binding(ResourceType::Topic, "app.acl-test.", Operation::Read)
                },
                AclBinding {
                    principal: principal.clone(),
                    ..binding(ResourceType::Topic, "app.acl-test.", Operation::Write)
                },
                AclBinding {
                    principal: principal.clone(),
                    pattern: PatternType::Literal,
                    ..binding(ResourceType::Group, "app.acl-test", Operation::Read)
                },
                AclBinding {
                    principal: principal.clone(),
                    pattern: PatternType::Literal,
                    ..binding(
                        ResourceType::Cluster,
                        "kafka-cluster",
                        Operation::IdempotentWrite,
                    )
                },
            ];
            v.sort();
            v
        };
        // Brokers apply ACL changes from the metadata log a moment after the controller
        // commits them, so a describe right after a change may still show the old state.
        let settle = |expected: &[AclBinding]| {
            let until = Instant::now() + Duration::from_secs(15);
            loop {
                let now = describe_acls(&admin, &mine, timeout).expect("describe");
                if now == expected || Instant::now() > until {
                    return now;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        };

        assert_eq!(settle(&[]), [], "a fresh principal has no ACLs");
        create_acls(&admin, &wanted, timeout).expect("create");
        assert_eq!(settle(&wanted), wanted);
        create_acls(&admin, &wanted, timeout).expect("creating existing ACLs is a no-op");
        assert_eq!(settle(&wanted), wanted);

        // The cluster's own refusal comes back with Kafka's message.
        let bad = AclBinding {
            principal: principal.clone(),
            pattern: PatternType::Literal,
            ..binding(ResourceType::Cluster, "not-the-cluster", Operation::Alter)
        };
        let err = create_acls(&admin, &[bad], timeout).expect_err("refused by the cluster");
        assert!(matches!(err, AgentError::KafkaAcl { .. }), "{err}");
        println!("the cluster refused a bad cluster ACL: {err}");

        let one = AclFilter::exact(&wanted[0]);
        assert_eq!(
            delete_acls(&admin, &[one], timeout).expect("delete one"),
            [wanted[0].clone()]
        );
        assert_eq!(settle(&wanted[1..]), wanted[1..]);
        let deleted =
            delete_acls(&admin, std::slice::from_ref(&mine), timeout).expect("delete all");
        assert_eq!(deleted, wanted[1..]);
        assert_eq!(settle(&[]), []);
        assert_eq!(
            delete_acls(&admin, &[mine], timeout).expect("delete nothing"),
            []
        );
    }
}
