//! The consumer-create handshake between subject and body, as nats-server's API handler
//! does it before any config defaulting: which name the consumer gets, and the errors for a
//! body that contradicts its subject (10056 stream, 10016-10020 durable names, 10131/10137
//! filter in the subject).

use super::consumer_config::{ConsumerConfig, CreateConsumerRequest};
use super::error::{ApiError, ErrorKind};
use super::subject::ConsumerCreateForm;

impl CreateConsumerRequest {
    /// Checks the body against the subject it came on and returns the config with its
    /// `name` settled (`None`-named legacy ephemerals keep an empty name: the caller picks
    /// one). `stream` is the stream token of the subject.
    pub fn resolve(
        self,
        stream: &str,
        form: &ConsumerCreateForm,
    ) -> Result<ConsumerConfig, ApiError> {
        if self.stream_name != stream {
            return Err(ErrorKind::StreamMismatch.into());
        }
        let mut config = self.config;
        match form {
            ConsumerCreateForm::LegacyEphemeral => {
                if config.is_durable() {
                    return Err(ErrorKind::ConsumerEphemeralWithDurableName.into());
                }
            }
            ConsumerCreateForm::LegacyDurable { durable } => {
                if !config.is_durable() {
                    return Err(ErrorKind::ConsumerDurableNameNotSet.into());
                }
                if config.durable_name != *durable {
                    return Err(ErrorKind::ConsumerDurableNameNotMatchSubject.into());
                }
                config.name = durable.clone();
            }
            ConsumerCreateForm::Named { consumer, filter } => {
                if config.is_durable() && config.durable_name != *consumer {
                    return Err(ErrorKind::ConsumerDurableNameNotMatchSubject.into());
                }
                config.name = consumer.clone();
                if let Some(filter) = filter {
                    if !config.filter_subjects.is_empty() {
                        return Err(ErrorKind::ConsumerMultipleFiltersNotAllowed.into());
                    }
                    if config.filter_subject != *filter {
                        return Err(ErrorKind::ConsumerCreateFilterSubjectMismatch.into());
                    }
                }
            }
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(stream: &str, config: ConsumerConfig) -> CreateConsumerRequest {
        CreateConsumerRequest {
            stream_name: stream.into(),
            config,
            ..CreateConsumerRequest::default()
        }
    }

    fn durable(name: &str) -> ConsumerConfig {
        ConsumerConfig {
            durable_name: name.into(),
            ..ConsumerConfig::default()
        }
    }

    fn named(consumer: &str, filter: Option<&str>) -> ConsumerCreateForm {
        ConsumerCreateForm::Named {
            consumer: consumer.into(),
            filter: filter.map(str::to_string),
        }
    }

    #[test]
    fn named_form_sets_the_name() {
        let cfg = request("ORDERS", durable("proc"))
            .resolve("ORDERS", &named("proc", None))
            .unwrap();
        assert_eq!(cfg.name, "proc");
        let ephemeral = request("ORDERS", ConsumerConfig::default())
            .resolve("ORDERS", &named("eph", None))
            .unwrap();
        assert_eq!(ephemeral.name, "eph");
        assert!(!ephemeral.is_durable());
    }

    #[test]
    fn mismatches() {
        let code = |req: CreateConsumerRequest, form: ConsumerCreateForm| {
            req.resolve("ORDERS", &form).unwrap_err().err_code
        };
        assert_eq!(
            code(request("OTHER", durable("p")), named("p", None)),
            10056
        );
        assert_eq!(
            code(request("ORDERS", durable("x")), named("p", None)),
            10017
        );
        assert_eq!(
            code(
                request("ORDERS", durable("p")),
                ConsumerCreateForm::LegacyEphemeral
            ),
            10020
        );
        assert_eq!(
            code(
                request("ORDERS", ConsumerConfig::default()),
                ConsumerCreateForm::LegacyDurable {
                    durable: "p".into()
                }
            ),
            10018
        );
        assert_eq!(
            code(
                request("ORDERS", durable("q")),
                ConsumerCreateForm::LegacyDurable {
                    durable: "p".into()
                }
            ),
            10017
        );
        let mut filtered = durable("p");
        filtered.filter_subject = "orders.eu".into();
        assert_eq!(
            code(
                request("ORDERS", filtered.clone()),
                named("p", Some("orders.us"))
            ),
            10131
        );
        assert!(request("ORDERS", filtered)
            .resolve("ORDERS", &named("p", Some("orders.eu")))
            .is_ok());
        let mut multi = durable("p");
        multi.filter_subjects = vec!["a".into(), "b".into()];
        assert_eq!(code(request("ORDERS", multi), named("p", Some("a"))), 10137);
    }
}
