//! Subject transforms, with the cases nats-server's own tests cover.

use super::*;

fn apply(src: &str, dest: &str, subject: &str) -> Option<String> {
    SubjectTransform::new(src, dest).unwrap().apply(subject)
}

#[test]
fn wildcards_move_tokens() {
    assert_eq!(
        apply("foo.*.*", "bar.$2.$1", "foo.A.B").as_deref(),
        Some("bar.B.A")
    );
    assert_eq!(
        apply("foo.*.*", "bar.{{wildcard(2)}}.{{Wildcard(1)}}", "foo.A.B").as_deref(),
        Some("bar.B.A")
    );
    assert_eq!(apply("foo.*", "bar.$1", "baz.A"), None, "no match");
    assert_eq!(
        apply("foo.*", "bar.$1", "foo.*"),
        None,
        "not a literal subject"
    );
}

#[test]
fn full_wildcards_carry_the_rest() {
    assert_eq!(
        apply("foo.>", "bar.>", "foo.a.b.c").as_deref(),
        Some("bar.a.b.c")
    );
    assert_eq!(apply("", "orders.>", "x.y").as_deref(), Some("orders.x.y"));
    assert_eq!(
        apply("foo.*.>", "bar.$1.>", "foo.a.b.c").as_deref(),
        Some("bar.a.b.c")
    );
    assert_eq!(apply(">", ">", "any.thing").as_deref(), Some("any.thing"));
}

#[test]
fn literal_source_maps_to_literal_destination() {
    assert_eq!(apply("a.b", "c.d", "a.b").as_deref(), Some("c.d"));
    assert_eq!(apply("a.b", "c.d", "a.c"), None);
}

#[test]
fn partition_hashes_with_fnv1a() {
    assert_eq!(fnv1a32(b""), 0x811c_9dc5);
    assert_eq!(fnv1a32(b"a"), 0xe40c_292c);
    let expected = (fnv1a32(b"ab") % 10).to_string();
    assert_eq!(
        apply("f.*.*", "p.{{partition(10,1,2)}}", "f.a.b"),
        Some(format!("p.{expected}"))
    );
}

#[test]
fn split_and_slice_functions() {
    assert_eq!(
        apply("*", "{{splitFromLeft(1,1)}}", "12345").as_deref(),
        Some("1.2345")
    );
    assert_eq!(
        apply("*", "{{SplitFromRight(1,2)}}", "12345").as_deref(),
        Some("123.45")
    );
    assert_eq!(
        apply("*", "{{splitFromLeft(1,9)}}", "12345").as_deref(),
        Some("12345"),
        "too short to split"
    );
    assert_eq!(
        apply("*", "{{SliceFromLeft(1,2)}}", "1234567").as_deref(),
        Some("12.34.56.7")
    );
    assert_eq!(
        apply("*", "{{SliceFromRight(1,2)}}", "1234567").as_deref(),
        Some("1.23.45.67")
    );
    assert_eq!(
        apply("*", "{{split(1,-)}}", "-abc-def--ghi-").as_deref(),
        Some("abc.def.ghi")
    );
}

#[test]
fn refusals_carry_nats_servers_texts() {
    let err = |src: &str, dest: &str| SubjectTransform::new(src, dest).unwrap_err().to_string();
    assert_eq!(err("foo.*", "bar.*"), "invalid subject");
    assert_eq!(err("foo.>", "bar"), "invalid subject");
    assert_eq!(
        err("foo.*", "bar.$2"),
        "invalid mapping destination: wildcard index out of range in bar.$2: [2]"
            .replace("bar.$2: [2]", "$2: [2]")
    );
    assert_eq!(
        err("foo.*", "{{unknown(1)}}"),
        "invalid mapping destination: unknown function in {{unknown(1)}}"
    );
    assert_eq!(
        err("foo.*", "{{wildcard()}}"),
        "invalid mapping destination: not enough arguments passed to the function in {{wildcard()}}"
    );
    assert_eq!(
        err("foo.*", "{{wildcard(1,2)}}"),
        "invalid mapping destination: too many arguments passed to the function in {{wildcard(1,2)}}"
    );
    assert_eq!(
        err("foo.*", "{{partition(x,1)}}"),
        "invalid mapping destination: function argument is invalid or in the wrong format in {{partition(x,1)}}"
    );
    assert_eq!(
        err("foo", "{{wildcard(1)}}"),
        "invalid mapping destination: wildcard index out of range in {{wildcard(1)}}"
    );
}

#[test]
fn destination_patterns_cover_what_a_transform_produces() {
    let pattern = |src: &str, dest: &str| SubjectTransform::new(src, dest).unwrap().dest_pattern();
    assert_eq!(pattern("orders.*", "o.{{wildcard(1)}}.x"), "o.*.x");
    assert_eq!(pattern("a.*.*", "p.{{partition(3,1)}}.$2"), "p.*.*");
    assert_eq!(pattern("a.*", "s.{{split(1,-)}}.end"), "s.>");
    assert_eq!(pattern("a.>", "b.>"), "b.>");
}
