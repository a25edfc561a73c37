//! PostgreSQL as a document store, the way a user would pick it instead of SiltDB: each
//! document in a `jsonb` column beside a `bigint` primary key taken from its `_id`, and an
//! expression index for each index the workload declares. Built only with
//! `--features postgres`; the server is started by `bench/peers.sh` (settings there).
//!
//! Batches go as one statement per batch (`jsonb_array_elements` over one JSON array
//! parameter), the same batch sizes the wire workloads send.

use bson::{Bson, Document};

/// One key of an expression index: a path into the document (`price`, or `dateandtime.$date`
/// for a date in extended JSON) and the SQL type its value is cast to.
pub type IndexField = (&'static str, &'static str);

/// The SQL expression of an index key: `((doc->'a'->>'b')::type)`.
fn key_expr((path, ty): &IndexField) -> String {
    let parts: Vec<&str> = path.split('.').collect();
    let mut e = String::from("doc");
    for (i, p) in parts.iter().enumerate() {
        let op = if i + 1 == parts.len() { "->>" } else { "->" };
        e.push_str(&format!("{op}'{p}'"));
    }
    format!("(({e})::{ty})")
}

pub struct Pg {
    client: postgres::Client,
}

/// JSON text of a batch of documents (relaxed extended JSON, as `mongoexport` writes it).
fn json_array(docs: &[Document]) -> String {
    let arr: Vec<serde_json::Value> = docs
        .iter()
        .map(|d| Bson::Document(d.clone()).into_relaxed_extjson())
        .collect();
    serde_json::Value::Array(arr).to_string()
}

impl Pg {
    /// Connect to `$SILT_PG` (a libpq-style string from `bench/peers.sh env`).
    pub fn connect() -> Result<Pg, String> {
        let conn = std::env::var("SILT_PG").map_err(|_| {
            "SILT_PG is not set: run `bash bench/peers.sh start` and `eval \"$(bash bench/peers.sh env)\"`".to_string()
        })?;
        let client = postgres::Client::connect(&conn, postgres::NoTls)
            .map_err(|e| format!("postgres at {conn}: {e}"))?;
        Ok(Pg { client })
    }

    /// The server's version string.
    pub fn version(&mut self) -> String {
        self.client
            .query_one("SHOW server_version", &[])
            .ok()
            .and_then(|r| r.try_get::<_, String>(0).ok())
            .unwrap_or_default()
    }

    fn exec(&mut self, sql: &str) -> Result<(), String> {
        self.client
            .batch_execute(sql)
            .map_err(|e| format!("postgres: {sql}: {e}"))
    }

    /// A new empty table (dropped first if it exists) with an expression index per entry of
    /// `indexes`, created before the load as the wire workloads create theirs.
    pub fn create(&mut self, table: &str, indexes: &[&[IndexField]]) -> Result<(), String> {
        self.exec(&format!(
            "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id bigint PRIMARY KEY, doc jsonb NOT NULL)"
        ))?;
        for (i, fields) in indexes.iter().enumerate() {
            let cols: Vec<String> = fields.iter().map(key_expr).collect();
            self.exec(&format!(
                "CREATE INDEX {table}_ix{i} ON {table} ({})",
                cols.join(", ")
            ))?;
        }
        Ok(())
    }

    /// Insert one batch in one statement.
    pub fn insert(&mut self, table: &str, docs: &[Document]) -> Result<u64, String> {
        let sql = format!(
            "INSERT INTO {table} (id, doc) SELECT (e->>'_id')::bigint, e FROM jsonb_array_elements($1::text::jsonb) e"
        );
        self.client
            .execute(&sql, &[&json_array(docs)])
            .map_err(|e| format!("postgres insert: {e}"))
    }

    /// Add one to the integer `field` of the document with primary key `id` (the equivalent
    /// of `update({_id: id}, {$inc: {field: 1}})`); returns the rows changed.
    pub fn inc_by_id(&mut self, table: &str, field: &str, id: i64) -> Result<u64, String> {
        let sql = format!(
            "UPDATE {table} SET doc = jsonb_set(doc, '{{{field}}}', to_jsonb((doc->>'{field}')::bigint + 1)) WHERE id = $1"
        );
        self.client
            .execute(&sql, &[&id])
            .map_err(|e| format!("postgres update: {e}"))
    }

    /// Rows in the table.
    pub fn count(&mut self, table: &str) -> Result<i64, String> {
        self.client
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .and_then(|r| r.try_get(0))
            .map_err(|e| format!("postgres count: {e}"))
    }

    /// The sum of an integer field over the table.
    pub fn sum(&mut self, table: &str, field: &str) -> Result<i64, String> {
        self.client
            .query_one(
                &format!("SELECT coalesce(sum((doc->>'{field}')::bigint), 0)::bigint FROM {table}"),
                &[],
            )
            .and_then(|r| r.try_get(0))
            .map_err(|e| format!("postgres sum: {e}"))
    }

    /// Bytes of the table, its TOAST table and its indexes (`pg_total_relation_size`), after
    /// a `CHECKPOINT`. The WAL is not counted (siltd's log is, in its own figure).
    pub fn table_bytes(&mut self, table: &str) -> Result<u64, String> {
        self.exec("CHECKPOINT")?;
        self.client
            .query_one(&format!("SELECT pg_total_relation_size('{table}')"), &[])
            .and_then(|r| r.try_get::<_, i64>(0))
            .map(|b| b.max(0) as u64)
            .map_err(|e| format!("postgres size: {e}"))
    }

    /// Refresh the planner's statistics after a load (what autovacuum would do shortly).
    pub fn analyze(&mut self, table: &str) -> Result<(), String> {
        self.exec(&format!("ANALYZE {table}"))
    }

    /// Drop the table.
    pub fn drop_table(&mut self, table: &str) -> Result<(), String> {
        self.exec(&format!("DROP TABLE IF EXISTS {table}"))
    }
}
