//! CONNECT: the client's options, protocol checks and authentication.

use super::errors;
use super::reader::{Closing, Reader};
use crate::config::Auth;
use crate::server::client::CloseReason;
use crate::wire::handshake::ConnectOptions;

impl Reader {
    pub(super) fn connect(&mut self, json: &[u8]) -> Result<(), Closing> {
        let options = match ConnectOptions::parse(json) {
            Ok(options) => options,
            Err(err) => {
                // nats-server closes without an -ERR when CONNECT is not valid JSON.
                tracing::debug!(cid = self.client.id, "bad CONNECT json: {err}");
                self.client.close(CloseReason::ProtocolViolation);
                return Err(Closing);
            }
        };
        if !(0..=1).contains(&options.protocol) {
            return self.refuse(errors::INVALID_PROTOCOL, CloseReason::ProtocolViolation);
        }
        if options.no_responders && !options.headers {
            return self.refuse(
                errors::NO_RESPONDERS_NEEDS_HEADERS,
                CloseReason::ProtocolViolation,
            );
        }
        if options.account.is_some() || options.new_account.is_some() || !self.authorized(&options)
        {
            return self.refuse(
                errors::AUTHORIZATION_VIOLATION,
                CloseReason::AuthorizationViolation,
            );
        }
        tracing::debug!(
            cid = self.client.id,
            name = options.name.as_deref().unwrap_or(""),
            lang = options.lang.as_deref().unwrap_or(""),
            version = options.version.as_deref().unwrap_or(""),
            "client connected"
        );
        self.client.set_headers(options.headers);
        self.options = Some(options);
        self.ack_if_verbose();
        Ok(())
    }

    fn authorized(&self, options: &ConnectOptions) -> bool {
        match &self.shared.config.auth {
            Auth::None => true,
            Auth::UserPass { user, pass } => {
                options.user.as_deref() == Some(user.as_str())
                    && options.pass.as_deref() == Some(pass.as_str())
            }
            Auth::Token(token) => options.auth_token.as_deref() == Some(token.as_str()),
        }
    }

    fn refuse(&self, text: &str, reason: CloseReason) -> Result<(), Closing> {
        self.client.close_with_err(Some(text), reason);
        Err(Closing)
    }
}
