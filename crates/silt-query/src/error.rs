//! Errors in MongoDB's vocabulary: every failure carries the numeric code and code name a
//! driver expects (`ok: 0, errmsg, code, codeName`).

use std::fmt;

/// A MongoDB-style error: code, code name and message.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryError {
    pub code: i32,
    pub code_name: &'static str,
    pub msg: String,
    /// Fields the error reply carries besides `errmsg`, `code` and `codeName` (a duplicate
    /// key's `keyPattern` and `keyValue`, a validation failure's `errInfo`).
    pub info: Option<Box<bson::Document>>,
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.code_name, self.code, self.msg)
    }
}

impl std::error::Error for QueryError {}

pub type QResult<T> = std::result::Result<T, QueryError>;

macro_rules! codes {
    ($($fn:ident => $code:expr, $name:expr;)*) => {
        impl QueryError {
            $(
                #[doc = concat!("`", $name, "` (", stringify!($code), ")")]
                pub fn $fn(msg: impl Into<String>) -> QueryError {
                    QueryError { code: $code, code_name: $name, msg: msg.into(), info: None }
                }
            )*
        }
    };
}

codes! {
    internal => 1, "InternalError";
    bad_value => 2, "BadValue";
    no_such_key => 4, "NoSuchKey";
    data_corruption_detected => 12, "DataCorruptionDetected";
    failed_to_parse => 9, "FailedToParse";
    type_mismatch => 14, "TypeMismatch";
    overflow => 15, "Overflow";
    invalid_length => 16, "InvalidLength";
    illegal_operation => 20, "IllegalOperation";
    namespace_not_found => 26, "NamespaceNotFound";
    path_not_viable => 28, "PathNotViable";
    conflicting_update_operators => 40, "ConflictingUpdateOperators";
    cursor_not_found => 43, "CursorNotFound";
    namespace_exists => 48, "NamespaceExists";
    max_time_ms_expired => 50, "MaxTimeMSExpired";
    dollar_prefixed_field_name => 52, "DollarPrefixedFieldName";
    invalid_id_field => 53, "InvalidIdField";
    not_single_value_field => 54, "NotSingleValueField";
    empty_field_name => 56, "EmptyFieldName";
    dotted_field_name => 57, "DottedFieldName";
    command_not_found => 59, "CommandNotFound";
    immutable_field => 66, "ImmutableField";
    invalid_options => 72, "InvalidOptions";
    invalid_namespace => 73, "InvalidNamespace";
    index_not_found => 27, "IndexNotFound";
    operation_failed => 96, "OperationFailed";
    write_conflict => 112, "WriteConflict";
    document_validation_failure => 121, "DocumentValidationFailure";
    not_implemented => 238, "NotImplemented";
    invalid_index_specification_option => 197, "InvalidIndexSpecificationOption";
    location => 17, "Location";
    duplicate_key => 11000, "DuplicateKey";
    invalid_pipeline_operator => 168, "InvalidPipelineOperator";
    unauthorized => 13, "Unauthorized";
    interrupted => 11601, "Interrupted";
    bson_object_too_large => 10334, "BSONObjectTooLarge";
    cannot_backfill_array => 34, "CannotBackfillArray";
    cannot_create_index => 67, "CannotCreateIndex";
    index_options_conflict => 85, "IndexOptionsConflict";
    index_key_specs_conflict => 86, "IndexKeySpecsConflict";
    command_failed => 125, "CommandFailed";
    exceeded_memory_limit => 146, "ExceededMemoryLimit";
    cannot_index_parallel_arrays => 171, "CannotIndexParallelArrays";
    conversion_failure => 241, "ConversionFailure";
    ambiguous_index_key_pattern => 35, "AmbiguousIndexKeyPattern";
    already_initialized => 23, "AlreadyInitialized";
    no_replication_enabled => 76, "NoReplicationEnabled";
    unsatisfiable_write_concern => 100, "UnsatisfiableWriteConcern";
    conflicting_operation_in_progress => 117, "ConflictingOperationInProgress";
    transaction_too_old => 225, "TransactionTooOld";
    snapshot_too_old => 239, "SnapshotTooOld";
    no_such_transaction => 251, "NoSuchTransaction";
    transaction_committed => 256, "TransactionCommitted";
    operation_not_supported_in_transaction => 263, "OperationNotSupportedInTransaction";
    client_metadata_cannot_be_mutated => 186, "ClientMetadataCannotBeMutated";
    query_plan_killed => 175, "QueryPlanKilled";
    cursor_in_use => 292, "CursorInUse";
}

impl QueryError {
    /// This error with the extra reply fields `info`.
    pub fn with_info(mut self, info: bson::Document) -> QueryError {
        self.info = Some(Box::new(info));
        self
    }

    /// This error with mongod's context added in front: "`what` :: caused by :: message",
    /// code and name unchanged.
    pub fn context(mut self, what: &str) -> QueryError {
        self.msg = format!("{what} :: caused by :: {}", self.msg);
        self
    }

    /// An error with an explicit code and name.
    pub fn coded(code: i32, code_name: &'static str, msg: impl Into<String>) -> QueryError {
        QueryError {
            code,
            code_name,
            msg: msg.into(),
            info: None,
        }
    }

    /// The code name a reply carries: the table's name, or `Location<N>` for an error
    /// MongoDB raises by location number.
    pub fn name(&self) -> std::borrow::Cow<'static, str> {
        match self.code_name {
            "Location" => format!("Location{}", self.code).into(),
            n => n.into(),
        }
    }

    /// An error MongoDB reports with a numbered "Location" code (e.g. `Location16020`):
    /// the code is the number and the code name is `Location<N>`.
    pub fn located(code: i32, msg: impl Into<String>) -> QueryError {
        QueryError {
            code,
            code_name: "Location",
            msg: msg.into(),
            info: None,
        }
    }
}
