//! The fields of the commands whose lists are long: what each honours, and the fields MongoDB
//! knows that siltd does not implement (refused unless they carry their default). The command
//! table (`table.rs`) names these; `args.rs` checks a command against them. Why each refused
//! field is refused, and what is accepted instead: `docs/refusals.md`.

use super::args::Fields;

/// A strictly parsed command's fields.
pub(super) const fn only(
    honoured: &'static [&'static str],
    refused: &'static [&'static str],
) -> Fields {
    Fields::Only { honoured, refused }
}

/// `aggregate`.
pub(super) const AGGREGATE: Fields = only(
    &[
        "collation",
        "let",
        "pipeline",
        "cursor",
        "explain",
        "allowDiskUse",
        "hint",
        "bypassDocumentValidation",
    ],
    &[
        "needsMerge",
        "fromMongos",
        "exchange",
        "runtimeConstants",
        "isMapReduceCommand",
        "collectionUUID",
        "$_passthroughToShard",
        "encryptionInformation",
        "$_externalDataSources",
        "$_isClusterQueryWithoutShardKeyCmd",
        "$_requestResumeToken",
        "$_resumeAfter",
        "$_requestReshardingResumeToken",
    ],
);

/// `collMod`.
pub(super) const COLL_MOD: Fields = only(
    &[
        "validator",
        "validationLevel",
        "validationAction",
        "index",
        "viewOn",
        "pipeline",
        "changeStreamPreAndPostImages",
    ],
    &[
        "expireAfterSeconds",
        "timeseries",
        "cappedSize",
        "cappedMax",
        "recordPreImages",
        "dryRun",
        "collectionUUID",
        "isTimeseriesNamespace",
    ],
);

/// `create`.
pub(super) const CREATE: Fields = only(
    &[
        "validator",
        "validationLevel",
        "validationAction",
        "capped",
        "size",
        "max",
        "idIndex",
        "partitioned",
        "primaryKey",
        "partitionRetention",
        "clusteredIndex",
        "viewOn",
        "pipeline",
        "collation",
        "storageEngine",
        "indexOptionDefaults",
        "autoIndexId",
        "flags",
        "changeStreamPreAndPostImages",
    ],
    &[
        "recordPreImages",
        "timeseries",
        "expireAfterSeconds",
        "encryptedFields",
        "temp",
    ],
);

/// `delete`.
pub(super) const DELETE: Fields = only(
    &["let", "deletes", "ordered", "bypassDocumentValidation"],
    &[
        "runtimeConstants",
        "stmtIds",
        "isTimeseriesNamespace",
        "collectionUUID",
        "encryptionInformation",
    ],
);

/// `find`.
pub(super) const FIND: Fields = only(
    &[
        "collation",
        "let",
        "filter",
        "projection",
        "sort",
        "hint",
        "skip",
        "limit",
        "batchSize",
        "singleBatch",
        "allowDiskUse",
        "allowPartialResults",
        "oplogReplay",
        "tailable",
        "awaitData",
        "noCursorTimeout",
        // A storage-cache hint: the results are the same.
        "readOnce",
        // Type-checked by the handler, which refuses `true` (not implemented).
        "returnKey",
        "showRecordId",
    ],
    &[
        "min",
        "max",
        "term",
        "allowSpeculativeMajorityRead",
        "$_requestResumeToken",
        "$_resumeAfter",
        "runtimeConstants",
        "collectionUUID",
        "encryptionInformation",
    ],
);

/// `findAndModify`.
pub(super) const FIND_AND_MODIFY: Fields = only(
    &[
        "collation",
        "let",
        "query",
        "fields",
        "sort",
        "remove",
        "update",
        "upsert",
        "new",
        "arrayFilters",
        "hint",
        "bypassDocumentValidation",
        // Cursor options with no meaning for one document: accepted, as by mongod.
        "batchSize",
        "singleBatch",
    ],
    &[
        "runtimeConstants",
        "encryptionInformation",
        "collectionUUID",
    ],
);

/// `insert`.
pub(super) const INSERT: Fields = only(
    &[
        "documents",
        "ordered",
        "bypassDocumentValidation",
        "ignoreDuplicates",
    ],
    &[
        "stmtIds",
        "isTimeseriesNamespace",
        "collectionUUID",
        "encryptionInformation",
    ],
);

/// `listCollections`.
pub(super) const LIST_COLLECTIONS: Fields = only(
    // siltd has no drop-pending collections: `includePendingDrops` changes nothing.
    &[
        "filter",
        "nameOnly",
        "authorizedCollections",
        "cursor",
        "includePendingDrops",
    ],
    &[],
);

/// `update`.
pub(super) const UPDATE: Fields = only(
    &[
        "let",
        "updates",
        "ordered",
        "bypassDocumentValidation",
        "fastUpdate",
    ],
    &[
        "runtimeConstants",
        "stmtIds",
        "isTimeseriesNamespace",
        "collectionUUID",
        "encryptionInformation",
    ],
);

/// `usersInfo`.
pub(super) const USERS_INFO: Fields = only(
    &[
        "showCredentials",
        "showPrivileges",
        "showAuthenticationRestrictions",
        "filter",
        "comment",
    ],
    &[],
);
