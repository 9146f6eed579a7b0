//! What nats-server derives from a mirror's or source's config: the internal name that keys
//! a source's progress and fills its `Nats-Stream-Source` header (`composeIName`: the
//! stream name, the filters and the destinations, `>` standing for none), and the header
//! itself (`<name> <origin seq> <filters> <destinations>`).

use super::stream_config::StreamSource;

impl StreamSource {
    /// `<name> <filters> <destinations>`: several transforms' filters (and destinations)
    /// joined by a form feed, as nats-server does.
    pub fn internal_name(&self) -> String {
        let or_all = |text: &str| {
            if text.is_empty() {
                ">".to_owned()
            } else {
                text.to_owned()
            }
        };
        let (filters, destinations) = if self.subject_transforms.is_empty() {
            (or_all(&self.filter_subject), ">".to_owned())
        } else {
            let filters: Vec<String> = self
                .subject_transforms
                .iter()
                .map(|t| or_all(&t.src))
                .collect();
            let destinations: Vec<String> = self
                .subject_transforms
                .iter()
                .map(|t| or_all(&t.dest))
                .collect();
            (filters.join("\u{c}"), destinations.join("\u{c}"))
        };
        format!("{} {filters} {destinations}", self.name)
    }
}

/// The `Nats-Stream-Source` value of origin message `origin_seq` of the source with this
/// internal name.
pub fn source_header_value(internal_name: &str, origin_seq: u64) -> String {
    let mut parts = internal_name.splitn(3, ' ');
    let name = parts.next().unwrap_or_default();
    let filters = parts.next().unwrap_or(">");
    let destinations = parts.next().unwrap_or(">");
    format!("{name} {origin_seq} {filters} {destinations}")
}

/// The header block a sourced copy is stored with: the origin's block without its own
/// `Nats-Stream-Source` (a chain of sources keeps only the nearest) and without its
/// `Nats-Expected-*` headers (the copy is not checked against them), then
/// `Nats-Stream-Source: <value>`, as nats-server does.
pub fn sourced_headers(origin: Option<&[u8]>, source_value: &str) -> Vec<u8> {
    let mut block = b"NATS/1.0\r\n".to_vec();
    if let Some(origin) = origin.filter(|block| block.starts_with(b"NATS/1.0")) {
        let text = String::from_utf8_lossy(origin);
        let mut lines = text.split("\r\n");
        if let Some(status) = lines.next() {
            block = format!("{status}\r\n").into_bytes();
        }
        for line in lines.filter(|line| !line.is_empty()) {
            let name = line.split(':').next().unwrap_or_default().trim();
            let lower = name.to_ascii_lowercase();
            if lower == "nats-stream-source" || lower.starts_with("nats-expected-") {
                continue;
            }
            block.extend_from_slice(line.as_bytes());
            block.extend_from_slice(b"\r\n");
        }
    }
    block.extend_from_slice(b"Nats-Stream-Source: ");
    block.extend_from_slice(source_value.as_bytes());
    block.extend_from_slice(b"\r\n\r\n");
    block
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsapi::stream_config::SubjectTransform;

    #[test]
    fn internal_names_as_nats_server_composes_them() {
        let plain = StreamSource {
            name: "ORDERS".into(),
            ..Default::default()
        };
        assert_eq!(plain.internal_name(), "ORDERS > >");
        assert_eq!(
            source_header_value(&plain.internal_name(), 5),
            "ORDERS 5 > >"
        );
        let filtered = StreamSource {
            name: "ORDERS".into(),
            filter_subject: "orders.eu".into(),
            ..Default::default()
        };
        assert_eq!(filtered.internal_name(), "ORDERS orders.eu >");
        let transformed = StreamSource {
            name: "A".into(),
            subject_transforms: vec![
                SubjectTransform {
                    src: "a.*".into(),
                    dest: "x.$1".into(),
                },
                SubjectTransform {
                    src: "b.>".into(),
                    dest: String::new(),
                },
            ],
            ..Default::default()
        };
        assert_eq!(transformed.internal_name(), "A a.*\u{c}b.> x.$1\u{c}>");
    }

    #[test]
    fn sourced_headers_replace_the_source_and_drop_expectations() {
        assert_eq!(
            sourced_headers(None, "A 1 > >"),
            b"NATS/1.0\r\nNats-Stream-Source: A 1 > >\r\n\r\n".to_vec()
        );
        let origin = b"NATS/1.0\r\nX: 1\r\nNats-Stream-Source: Z 9 > >\r\n\
            Nats-Expected-Last-Sequence: 4\r\nNats-Msg-Id: m\r\n\r\n";
        assert_eq!(
            String::from_utf8(sourced_headers(Some(origin), "A 2 > >")).unwrap(),
            "NATS/1.0\r\nX: 1\r\nNats-Msg-Id: m\r\nNats-Stream-Source: A 2 > >\r\n\r\n"
        );
    }
}
