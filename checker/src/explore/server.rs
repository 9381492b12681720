//! The Explorer's HTTP server: stateright's UI (vendored in `checker/ui`, with isr's changes)
//! and the JSON API of [`super::api`], on one thread.

use super::api::Explorer;
use tiny_http::{Header, Method, Request, Response, Server, StatusCode};

/// The UI's files, with their content types.
const FILES: [(&str, &str, &[u8]); 4] = [
    (
        "/",
        "text/html; charset=utf-8",
        include_bytes!("../../ui/index.htm"),
    ),
    (
        "/app.css",
        "text/css; charset=utf-8",
        include_bytes!("../../ui/app.css"),
    ),
    (
        "/app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../ui/app.js"),
    ),
    (
        "/knockout-3.5.0.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../ui/knockout-3.5.0.js"),
    ),
];

fn content_type(value: &str) -> Header {
    Header::from_bytes("Content-Type", value).expect("a valid header")
}

/// A JSON answer, always with its Content-Length: tiny-http would send a large one (a state
/// with many successors and properties) chunked, which simple clients do not expect.
fn json(value: &serde_json::Value) -> Response<std::io::Cursor<Vec<u8>>> {
    Response::from_data(value.to_string().into_bytes())
        .with_header(content_type("application/json"))
        .with_chunked_threshold(usize::MAX)
}

/// Answers one request.
fn answer(explorer: &Explorer, request: Request) {
    let url = request.url().split('?').next().unwrap_or("").to_string();
    let response = match (request.method(), url.as_str()) {
        (Method::Get, "/.status") => json(&explorer.status()),
        // The check runs at start: there is nothing left to run.
        (Method::Post, "/.runtocompletion") => Response::from_data(Vec::new()),
        (Method::Get, url) if url.starts_with("/.states") => {
            match explorer.states(&url["/.states".len()..]) {
                Ok(states) => json(&states),
                Err(e) => Response::from_data(e.into_bytes())
                    .with_status_code(StatusCode(404))
                    .with_header(content_type("text/plain; charset=utf-8")),
            }
        }
        (Method::Get, url) => match FILES.iter().find(|(path, _, _)| *path == url) {
            Some((_, kind, body)) => {
                Response::from_data(body.to_vec()).with_header(content_type(kind))
            }
            None => Response::from_data(Vec::new()).with_status_code(StatusCode(404)),
        },
        _ => Response::from_data(Vec::new()).with_status_code(StatusCode(405)),
    };
    // A browser that went away is no error of the Explorer's.
    let _ = request.respond(response);
}

/// Serves until the server fails.
pub fn serve(server: &Server, explorer: &Explorer) -> std::io::Error {
    loop {
        match server.recv() {
            Ok(request) => answer(explorer, request),
            Err(e) => return e,
        }
    }
}
