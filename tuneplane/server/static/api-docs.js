// The API reference at /docs: Swagger UI over /openapi.json, from the package's own copy.
// Started from this file rather than an inline script, so the page keeps the dashboard's
// Content-Security-Policy (script-src 'self'). A classic script, not a dashboard module.
/* global SwaggerUIBundle */
// The description is beside the static files, so it is found under a --root-path prefix too.
window.ui = SwaggerUIBundle({
  url: new URL("../openapi.json", document.currentScript.src).pathname,
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  presets: [SwaggerUIBundle.presets.apis],
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  // Swagger UI would otherwise send the description to validator.swagger.io for a badge.
  validatorUrl: null,
});
