/** Every view, in menu order. */

import type { View } from "../context.js";
import { adminIndexView } from "./admin-index.js";
import { adminIntegrityView } from "./admin-integrity.js";
import { adminMetricsView } from "./admin-metrics.js";
import { adminPoliciesView } from "./admin-policies.js";
import { adminSettingsView } from "./admin-settings.js";
import { graphView } from "./graph.js";
import { identityView } from "./identity.js";
import { memoriesView } from "./memories.js";
import { memoryView } from "./memory.js";
import { searchView } from "./search.js";
import { sessionsView } from "./sessions.js";
import { timelineView } from "./timeline.js";
import { workflowView } from "./workflow.js";

export const VIEWS: View[] = [
  memoriesView,
  memoryView,
  searchView,
  timelineView,
  graphView,
  sessionsView,
  workflowView,
  adminPoliciesView,
  adminSettingsView,
  adminIndexView,
  adminIntegrityView,
  adminMetricsView,
  identityView,
];
