//! The operator table: the operators taking positional arguments, their names and arities,
//! and the operators MongoDB has that siltd refuses by name.

/// Operators taking positional arguments (and the date-part and trim families, whose arguments
/// are named but share an implementation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Gt,
    Gte,
    Lt,
    Lte,
    Cmp,
    And,
    Or,
    Not,
    Add,
    Subtract,
    Multiply,
    Divide,
    Mod,
    Abs,
    Ceil,
    Floor,
    Round,
    Trunc,
    Sqrt,
    Pow,
    Exp,
    Ln,
    Log10,
    Log,
    Concat,
    Substr,
    SubstrBytes,
    SubstrCP,
    ToLower,
    ToUpper,
    StrLenBytes,
    StrLenCP,
    Split,
    IndexOfBytes,
    IndexOfCP,
    Strcasecmp,
    Trim,
    Ltrim,
    Rtrim,
    Size,
    ArrayElemAt,
    First,
    Last,
    ConcatArrays,
    In,
    IsArray,
    Slice,
    ReverseArray,
    Range,
    IndexOfArray,
    SetUnion,
    SetIntersection,
    SetDifference,
    SetEquals,
    SetIsSubset,
    AllElementsTrue,
    AnyElementTrue,
    IfNull,
    Type,
    IsNumber,
    MergeObjects,
    ObjectToArray,
    ArrayToObject,
    Sum,
    Avg,
    Min,
    Max,
    StdDevPop,
    StdDevSamp,
    Rand,
    BsonSize,
    Year,
    Month,
    DayOfMonth,
    Hour,
    Minute,
    Second,
    Millisecond,
    DayOfWeek,
    DayOfYear,
    Week,
    IsoWeek,
    IsoWeekYear,
    IsoDayOfWeek,
}

pub(super) const MANY: usize = usize::MAX;

/// Name, operator, minimum and maximum argument count.
const OPS: &[(&str, Op, usize, usize)] = &[
    ("$eq", Op::Eq, 2, 2),
    ("$ne", Op::Ne, 2, 2),
    ("$gt", Op::Gt, 2, 2),
    ("$gte", Op::Gte, 2, 2),
    ("$lt", Op::Lt, 2, 2),
    ("$lte", Op::Lte, 2, 2),
    ("$cmp", Op::Cmp, 2, 2),
    ("$and", Op::And, 0, MANY),
    ("$or", Op::Or, 0, MANY),
    ("$not", Op::Not, 1, 1),
    ("$add", Op::Add, 0, MANY),
    ("$subtract", Op::Subtract, 2, 2),
    ("$multiply", Op::Multiply, 0, MANY),
    ("$divide", Op::Divide, 2, 2),
    ("$mod", Op::Mod, 2, 2),
    ("$abs", Op::Abs, 1, 1),
    ("$ceil", Op::Ceil, 1, 1),
    ("$floor", Op::Floor, 1, 1),
    ("$round", Op::Round, 1, 2),
    ("$trunc", Op::Trunc, 1, 2),
    ("$sqrt", Op::Sqrt, 1, 1),
    ("$pow", Op::Pow, 2, 2),
    ("$exp", Op::Exp, 1, 1),
    ("$ln", Op::Ln, 1, 1),
    ("$log10", Op::Log10, 1, 1),
    ("$log", Op::Log, 2, 2),
    ("$concat", Op::Concat, 0, MANY),
    ("$substr", Op::Substr, 3, 3),
    ("$substrBytes", Op::SubstrBytes, 3, 3),
    ("$substrCP", Op::SubstrCP, 3, 3),
    ("$toLower", Op::ToLower, 1, 1),
    ("$toUpper", Op::ToUpper, 1, 1),
    ("$strLenBytes", Op::StrLenBytes, 1, 1),
    ("$strLenCP", Op::StrLenCP, 1, 1),
    ("$split", Op::Split, 2, 2),
    ("$indexOfBytes", Op::IndexOfBytes, 2, 4),
    ("$indexOfCP", Op::IndexOfCP, 2, 4),
    ("$strcasecmp", Op::Strcasecmp, 2, 2),
    ("$trim", Op::Trim, 1, 1),
    ("$ltrim", Op::Ltrim, 1, 1),
    ("$rtrim", Op::Rtrim, 1, 1),
    ("$size", Op::Size, 1, 1),
    ("$arrayElemAt", Op::ArrayElemAt, 2, 2),
    ("$first", Op::First, 1, 1),
    ("$last", Op::Last, 1, 1),
    ("$concatArrays", Op::ConcatArrays, 0, MANY),
    ("$in", Op::In, 2, 2),
    ("$isArray", Op::IsArray, 1, 1),
    ("$slice", Op::Slice, 2, 3),
    ("$reverseArray", Op::ReverseArray, 1, 1),
    ("$range", Op::Range, 2, 3),
    ("$indexOfArray", Op::IndexOfArray, 2, 4),
    ("$setUnion", Op::SetUnion, 0, MANY),
    ("$setIntersection", Op::SetIntersection, 0, MANY),
    ("$setDifference", Op::SetDifference, 2, 2),
    ("$setEquals", Op::SetEquals, 2, MANY),
    ("$setIsSubset", Op::SetIsSubset, 2, 2),
    ("$allElementsTrue", Op::AllElementsTrue, 1, 1),
    ("$anyElementTrue", Op::AnyElementTrue, 1, 1),
    ("$ifNull", Op::IfNull, 2, MANY),
    ("$type", Op::Type, 1, 1),
    ("$isNumber", Op::IsNumber, 1, 1),
    ("$mergeObjects", Op::MergeObjects, 0, MANY),
    ("$objectToArray", Op::ObjectToArray, 1, 1),
    ("$arrayToObject", Op::ArrayToObject, 1, 1),
    ("$sum", Op::Sum, 0, MANY),
    ("$avg", Op::Avg, 0, MANY),
    ("$min", Op::Min, 0, MANY),
    ("$max", Op::Max, 0, MANY),
    ("$stdDevPop", Op::StdDevPop, 0, MANY),
    ("$stdDevSamp", Op::StdDevSamp, 0, MANY),
    ("$rand", Op::Rand, 0, 0),
    ("$bsonSize", Op::BsonSize, 1, 1),
    ("$year", Op::Year, 1, 1),
    ("$month", Op::Month, 1, 1),
    ("$dayOfMonth", Op::DayOfMonth, 1, 1),
    ("$hour", Op::Hour, 1, 1),
    ("$minute", Op::Minute, 1, 1),
    ("$second", Op::Second, 1, 1),
    ("$millisecond", Op::Millisecond, 1, 1),
    ("$dayOfWeek", Op::DayOfWeek, 1, 1),
    ("$dayOfYear", Op::DayOfYear, 1, 1),
    ("$week", Op::Week, 1, 1),
    ("$isoWeek", Op::IsoWeek, 1, 1),
    ("$isoWeekYear", Op::IsoWeekYear, 1, 1),
    ("$isoDayOfWeek", Op::IsoDayOfWeek, 1, 1),
];

/// Operators MongoDB has that SiltDB does not implement (reported as NotImplemented rather than
/// as unknown).
pub(super) const UNSUPPORTED: &[&str] = &[
    "$regexFind",
    "$regexFindAll",
    "$dateFromParts",
    "$dateToParts",
    "$dateFromString",
    "$function",
    "$accumulator",
    "$meta",
    "$zip",
    "$median",
    "$percentile",
    "$binarySize",
    "$toHashedIndexKey",
    "$tsSecond",
    "$tsIncrement",
    "$sin",
    "$cos",
    "$tan",
    "$asin",
    "$acos",
    "$atan",
    "$atan2",
    "$sinh",
    "$cosh",
    "$tanh",
    "$asinh",
    "$acosh",
    "$atanh",
    "$degreesToRadians",
    "$radiansToDegrees",
    "$bitAnd",
    "$bitOr",
    "$bitXor",
    "$bitNot",
];

impl Op {
    /// The operator's name, with its `$`.
    pub fn name(self) -> &'static str {
        OPS.iter()
            .find(|(_, op, _, _)| *op == self)
            .map_or("$unknown", |(n, _, _, _)| n)
    }

    pub(super) fn lookup(name: &str) -> Option<(Op, usize, usize)> {
        OPS.iter()
            .find(|(n, _, _, _)| *n == name)
            .map(|(_, op, lo, hi)| (*op, *lo, *hi))
    }

    pub(super) fn is_date_part(self) -> bool {
        matches!(
            self,
            Op::Year
                | Op::Month
                | Op::DayOfMonth
                | Op::Hour
                | Op::Minute
                | Op::Second
                | Op::Millisecond
                | Op::DayOfWeek
                | Op::DayOfYear
                | Op::Week
                | Op::IsoWeek
                | Op::IsoWeekYear
                | Op::IsoDayOfWeek
        )
    }
}
