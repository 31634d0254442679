//! Errors as one line of text, for logs, status messages and exit messages.

/// An error and its causes on one line, `error: cause: cause…`. A cause whose text the
/// line already holds (many errors repeat their source in their own message) is left
/// out.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as _)
        }
    }

    #[test]
    fn causes_follow_the_error_once_each() {
        let e = Layer(
            "cannot connect",
            Some(Box::new(Layer(
                "io error: refused",
                Some(Box::new(Layer("refused", None))),
            ))),
        );
        assert_eq!(error_chain(&e), "cannot connect: io error: refused");
        assert_eq!(error_chain(&Layer("alone", None)), "alone");
    }
}
