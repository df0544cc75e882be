// The sign-in page: the token goes to /dashboard/session, which keeps it in an HttpOnly cookie.
"use strict";

const form = document.getElementById("sign-in");
form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const error = document.getElementById("sign-in-error");
  error.textContent = "";
  const response = await fetch("/dashboard/session", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ token: document.getElementById("token").value.trim() }),
  });
  if (!response.ok) {
    const body = await response.json().catch(() => null);
    error.textContent = typeof body?.detail === "string" ? body.detail : `HTTP ${response.status}`;
    return;
  }
  const next = new URLSearchParams(location.search).get("next") ?? "/dashboard";
  location.assign(next.startsWith("/dashboard") ? next : "/dashboard");
});
document.body.dataset.ready = "true";
