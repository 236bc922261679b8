//! Column values as the HTTP APIs carry them in JSON.
//!
//! | column type | JSON |
//! | --- | --- |
//! | integers | a whole number in the column's range (a string of digits is taken too) |
//! | `FLOAT`, `DOUBLE` | a number (a string holding one is taken too) |
//! | `DECIMAL` | a string such as `"-12.50"` (a number of up to 15 significant digits is taken too), with no more digits than the column holds; the REST data API answers a number with the column's digits, as RonDB does (`rest_value_to_json`) |
//! | `CHAR`, `VARCHAR` | a string |
//! | `BINARY`, `VARBINARY` | a string of standard base64 |
//! | `DATE`, `DATETIME`, `TIMESTAMP` | a string in MySQL's text form |
//! | `BOOL` | `true` / `false` (`0` / `1` taken too) |
//! | NULL | `null` |
//!
//! Values are checked against the column (range, length, precision) when
//! they are added to a batch; here only their JSON shape is. Nothing is
//! clamped, rounded or coerced: a value that does not fit exactly is
//! refused, and so is a row that names a column twice.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Serialize;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value as Json};
use shoal_wire::schema::{ColumnDef, ColumnType};

use crate::tc::Table;
use crate::tc::batch::Row;
use crate::types::value::{DateTime, JsonShape, Timestamp, Value, WithFsp};

/// Why a JSON value or row does not fit a table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum JsonError {
    #[error("table '{table}' has no column '{column}'")]
    NoSuchColumn { table: String, column: String },
    #[error("column '{column}' takes {expected}, not {got}")]
    WrongType {
        column: String,
        expected: &'static str,
        got: &'static str,
    },
    #[error("column '{column}' takes base64, and this is not valid base64")]
    NotBase64 { column: String },
    #[error("the key of table '{table}' is {expected:?}; column '{column}' is missing")]
    MissingKey {
        table: String,
        column: String,
        expected: Vec<String>,
    },
    #[error("column '{column}' is given twice; a row names each column once")]
    Duplicate { column: String },
    #[error("column '{column}' is not part of the key of table '{table}' ({expected:?})")]
    NotKey {
        table: String,
        column: String,
        expected: Vec<String>,
    },
}

/// The value `json` gives `column`.
pub(crate) fn value_from_json(column: &ColumnDef, json: &Json) -> Result<Value, JsonError> {
    Value::from_json(column.column_type, json).map_err(|shape| match shape {
        JsonShape::Wrong { expected, got } => JsonError::WrongType {
            column: column.name.to_string(),
            expected,
            got,
        },
        JsonShape::NotBase64 => JsonError::NotBase64 {
            column: column.name.to_string(),
        },
    })
}

/// `value` as JSON.
pub(crate) fn value_to_json(value: &Value) -> Json {
    match value {
        Value::Null => Json::Null,
        Value::Int(v) => Json::from(*v),
        Value::UInt(v) => Json::from(*v),
        // Non-finite floats have no JSON number: they go as text.
        Value::Float(v) if v.is_finite() => Json::from(f64::from(*v)),
        Value::Double(v) if v.is_finite() => Json::from(*v),
        Value::Bytes(b) => Json::String(BASE64.encode(b)),
        Value::Bool(b) => Json::Bool(*b),
        Value::Text(t) => Json::String(t.clone()),
        other => Json::String(other.to_string()),
    }
}

/// `value` of `column` as JSON: as `value_to_json`, with date-times
/// written to the column's fractional-seconds precision.
pub(crate) fn column_value_to_json(column: &ColumnDef, value: &Value) -> Json {
    let fsp = match column.column_type {
        ColumnType::DateTime { fsp } | ColumnType::Timestamp { fsp } => fsp,
        _ => return value_to_json(value),
    };
    match value {
        Value::DateTime(DateTime(micros)) | Value::Timestamp(Timestamp(micros)) => {
            Json::String(WithFsp(*micros, fsp).to_string())
        }
        other => value_to_json(other),
    }
}

/// A value as the REST data API answers it: JSON, or a number written as
/// its exact digits.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum RestValue {
    Json(Json),
    /// Written as it is: a `DECIMAL`'s digits, every one of them.
    Number(Box<RawValue>),
}

/// `value` of `column` as the REST data API answers it, in RonDB's shape:
/// as `column_value_to_json`, but a `DECIMAL` as a JSON number with the
/// digits the column holds (`12.50`, `12345678901234567890.1234567890`),
/// as RonDB writes one — never through a double, which would round a
/// value of more than 15 digits. (A client that parses numbers into
/// doubles rounds it then; the digits on the wire are exact.)
pub(crate) fn rest_value_to_json(column: &ColumnDef, value: &Value) -> RestValue {
    match value {
        Value::Decimal(d) => {
            let digits =
                RawValue::from_string(d.to_string()).expect("a decimal's text is a JSON number");
            RestValue::Number(digits)
        }
        _ => RestValue::Json(column_value_to_json(column, value)),
    }
}

/// A row read back, as a JSON object of column to value.
pub(crate) fn row_to_json(row: &Row) -> Map<String, Json> {
    row.table()
        .def()
        .columns
        .iter()
        .zip(row.values())
        .map(|(c, v)| (c.name.to_string(), column_value_to_json(c, v)))
        .collect()
}

/// A JSON object of column to value, as a request sends a row, with its
/// members in the order sent. Unlike a map it keeps a column named twice,
/// so that [`row_from_json`] refuses it instead of taking the last value.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct JsonRow(pub Vec<(String, Json)>);

impl<'de> Deserialize<'de> for JsonRow {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = JsonRow;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of column to value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonRow, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(0).min(64));
                while let Some(member) = map.next_entry()? {
                    members.push(member);
                }
                Ok(JsonRow(members))
            }
        }
        deserializer.deserialize_map(Members)
    }
}

/// A row to write: each named column's value. Columns left out keep their
/// value (update) or are NULL (insert).
pub(crate) fn row_from_json<'t>(
    table: &'t Table,
    row: &JsonRow,
) -> Result<Vec<(&'t str, Value)>, JsonError> {
    let def = table.def();
    let mut values: Vec<(&'t str, Value)> = Vec::with_capacity(row.0.len());
    for (name, json) in &row.0 {
        let column = def.column(name).ok_or_else(|| JsonError::NoSuchColumn {
            table: def.name.to_string(),
            column: short(name),
        })?;
        if values.iter().any(|(seen, _)| *seen == column.name.as_str()) {
            return Err(JsonError::Duplicate {
                column: column.name.to_string(),
            });
        }
        values.push((column.name.as_str(), value_from_json(column, json)?));
    }
    Ok(values)
}

/// `name` cut to a length an error message can carry.
fn short(name: &str) -> String {
    name.chars().take(64).collect()
}

/// A primary key: exactly the key columns, each once, in the key's order.
pub(crate) fn key_from_json(table: &Table, key: &JsonRow) -> Result<Vec<Value>, JsonError> {
    let def = table.def();
    let expected = || def.primary_key.iter().map(|c| c.to_string()).collect();
    for (i, (name, _)) in key.0.iter().enumerate() {
        if !def.primary_key.iter().any(|c| c.as_str() == name) {
            return Err(JsonError::NotKey {
                table: def.name.to_string(),
                column: short(name),
                expected: expected(),
            });
        }
        if key.0[..i].iter().any(|(seen, _)| seen == name) {
            return Err(JsonError::Duplicate {
                column: name.clone(),
            });
        }
    }
    def.primary_key
        .iter()
        .map(|name| {
            let (_, json) = (key.0.iter())
                .find(|(n, _)| n == name.as_str())
                .ok_or_else(|| JsonError::MissingKey {
                    table: def.name.to_string(),
                    column: name.to_string(),
                    expected: expected(),
                })?;
            let column = def.column(name.as_str()).expect("key columns are columns");
            value_from_json(column, json)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn column(ty: &str) -> ColumnDef {
        serde_json::from_value(json!({"name": "c", "type": ty, "nullable": true})).unwrap()
    }

    #[test]
    fn values_come_from_json_by_shape() {
        assert_eq!(
            value_from_json(&column("BIGINT"), &json!(-5)),
            Ok(Value::Int(-5))
        );
        assert_eq!(
            value_from_json(&column("BIGINT UNSIGNED"), &json!(u64::MAX)),
            Ok(Value::UInt(u64::MAX))
        );
        assert_eq!(
            value_from_json(&column("DOUBLE"), &json!(1.5)),
            Ok(Value::Double(1.5))
        );
        assert_eq!(
            value_from_json(&column("DATE"), &json!("2024-02-29")),
            Ok(Value::Text("2024-02-29".into()))
        );
        assert_eq!(
            value_from_json(&column("VARBINARY(10)"), &json!("AAH/")),
            Ok(Value::Bytes(vec![0, 1, 255]))
        );
        assert_eq!(
            value_from_json(&column("BOOL"), &json!(true)),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            value_from_json(&column("INT"), &json!(null)),
            Ok(Value::Null)
        );
    }

    #[test]
    fn wrong_shapes_are_refused_naming_the_column() {
        let err = value_from_json(&column("VARBINARY(10)"), &json!("not base64!")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "column 'c' takes base64, and this is not valid base64"
        );
        let err = value_from_json(&column("INT"), &json!([1])).unwrap_err();
        assert!(err.to_string().contains("not an array"), "{err}");
        assert!(value_from_json(&column("BINARY(4)"), &json!(7)).is_err());
        assert!(value_from_json(&column("VARCHAR(4)"), &json!({"a": 1})).is_err());
    }

    #[test]
    fn values_go_to_json_in_text_forms_where_json_has_no_type() {
        assert_eq!(value_to_json(&Value::Bytes(vec![0, 1, 255])), json!("AAH/"));
        assert_eq!(value_to_json(&Value::Double(f64::NAN)), json!("NaN"));
        assert_eq!(value_to_json(&Value::UInt(u64::MAX)), json!(u64::MAX));
        let date = crate::types::value::Date::parse("2024-02-29").unwrap();
        assert_eq!(value_to_json(&Value::Date(date)), json!("2024-02-29"));
    }
}
