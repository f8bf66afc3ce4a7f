// The API reference at /docs: Swagger UI over /openapi.json, from the package's own copy.
// Started from this file rather than an inline script, so the page keeps the dashboard's
// Content-Security-Policy (script-src 'self'). A classic script, not a dashboard module.
/* global SwaggerUIBundle */
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  presets: [SwaggerUIBundle.presets.apis],
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  // Swagger UI would otherwise send the description to validator.swagger.io for a badge.
  validatorUrl: null,
});
