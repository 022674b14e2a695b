/*
 * The portal's behaviour, kept out of the pages: the Content-Security-Policy allows no inline script and htmx runs
 * with eval off, so keyboard shortcuts, pausing the queue's polling on a hidden tab and renewing a review lease
 * live here (README: The reviewer queue). Every page works without this file: these are shortcuts only.
 *
 * Keys (not while typing in a field): j/k move through the queue, Enter opens the selected row, c claims the item
 * on screen (or the next one), p/f/m choose pass / fail / needs more evidence, 1-9 tick evidence item n, r focuses
 * the rationale, s skips the item, / focuses the filter, ? shows the cheat-sheet, Escape closes it. A key never
 * moves focus into a field it did not name (issue 14: p then 1 ticks evidence, it does not type "1"). In the
 * rationale, Ctrl+Enter submits; its counter warns past the limit and the form is not sent (the server refuses it
 * too: never a silent cut).
 */
(function () {
  "use strict";

  var root = document.documentElement;

  function csrfToken() {
    var raw = document.body ? document.body.getAttribute("hx-headers") : null;
    if (!raw) return "";
    try {
      return JSON.parse(raw)["X-CSRFToken"] || "";
    } catch (e) {
      return "";
    }
  }

  function typingIn(target) {
    if (!target || !target.tagName) return false;
    var tag = target.tagName.toLowerCase();
    return tag === "input" || tag === "textarea" || tag === "select" || target.isContentEditable;
  }

  // --- the cheat-sheet ---------------------------------------------------------------------------------------------
  function shortcuts() {
    return document.getElementById("shortcuts");
  }

  function toggleShortcuts(show) {
    var sheet = shortcuts();
    if (!sheet) return;
    sheet.hidden = show === undefined ? !sheet.hidden : !show;
  }

  // --- the queue: selection with j/k -------------------------------------------------------------------------------
  var selectedId = null;

  function rows() {
    return Array.prototype.slice.call(document.querySelectorAll("[data-queue-row]"));
  }

  function select(index) {
    var all = rows();
    if (!all.length) return;
    index = Math.max(0, Math.min(all.length - 1, index));
    all.forEach(function (row, i) {
      var on = i === index;
      row.classList.toggle("selected", on);
      row.setAttribute("aria-selected", on ? "true" : "false");
    });
    selectedId = all[index].getAttribute("data-queue-row");
    all[index].scrollIntoView({ block: "nearest" });
  }

  function selectedIndex() {
    var all = rows();
    for (var i = 0; i < all.length; i++) {
      if (all[i].getAttribute("data-queue-row") === selectedId) return i;
    }
    return -1;
  }

  function move(step) {
    var current = selectedIndex();
    select(current < 0 ? 0 : current + step);
  }

  function openSelected() {
    var all = rows();
    var index = selectedIndex();
    if (index < 0) return false;
    var link = all[index].querySelector("a[data-open]");
    if (link) {
      window.location.assign(link.href);
      return true;
    }
    return false;
  }

  // --- the review page: decisions ------------------------------------------------------------------------------------
  function choose(value) {
    var radio = document.querySelector('input[name="verdict"][value="' + value + '"]');
    if (!radio) return false;
    radio.checked = true;
    radio.dispatchEvent(new Event("change", { bubbles: true }));
    return true;
  }

  function focusField(id) {
    var field = document.getElementById(id);
    if (!field) return false;
    field.focus();
    return true;
  }

  // --- the rationale's character counter -------------------------------------------------------------------------
  function rationaleOver(field) {
    var max = Number(field.getAttribute("data-max-chars")) || 0;
    return max > 0 && field.value.length > max;
  }

  function updateCounter(field) {
    var counter = document.querySelector("[data-char-count]");
    if (!counter) return;
    var max = Number(field.getAttribute("data-max-chars")) || 0;
    var over = rationaleOver(field);
    counter.textContent =
      field.value.length + " / " + max + " characters" +
      (over ? " — " + (field.value.length - max) + " too many: shorten it to record the decision" : "");
    counter.classList.toggle("over", over);
    field.setCustomValidity(over ? "At most " + max + " characters." : "");
  }

  document.addEventListener("input", function (event) {
    var target = event.target;
    if (target && target.hasAttribute && target.hasAttribute("data-max-chars")) updateCounter(target);
  });

  function tickEvidence(n) {
    var boxes = document.querySelectorAll('input[name="cited_evidence"]');
    var box = boxes[n - 1];
    if (!box) return false;
    box.checked = !box.checked;
    return true;
  }

  function clickIfPresent(selector) {
    var element = document.querySelector(selector);
    if (!element) return false;
    element.click();
    return true;
  }

  document.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && event.target && event.target.form) {
      var form = event.target.form;
      if (form.hasAttribute("data-decision-form")) {
        event.preventDefault();
        if (typeof form.requestSubmit === "function") form.requestSubmit();
        else form.submit();
      }
      return;
    }
    if (event.key === "Escape") {
      toggleShortcuts(false);
      if (typingIn(event.target)) event.target.blur();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || typingIn(event.target)) return;
    var handled = false;
    switch (event.key) {
      case "?":
        toggleShortcuts();
        handled = true;
        break;
      case "j":
        move(1);
        handled = true;
        break;
      case "k":
        move(-1);
        handled = true;
        break;
      case "Enter":
        handled = openSelected();
        break;
      case "c":
        handled = clickIfPresent("[data-claim-this]") || clickIfPresent("[data-claim-next]");
        break;
      case "s":
        handled = clickIfPresent("[data-skip]");
        break;
      case "r":
        handled = focusField("id_rationale");
        break;
      case "p":
        handled = choose("PASS");
        break;
      case "f":
        handled = choose("FAIL");
        break;
      case "m":
        handled = choose("MORE_EVIDENCE");
        break;
      case "/":
        var filter = document.querySelector("[data-filter-focus]");
        if (filter) {
          filter.focus();
          handled = true;
        }
        break;
      default:
        if (/^[1-9]$/.test(event.key)) handled = tickEvidence(Number(event.key));
    }
    if (handled) event.preventDefault();
  });

  document.addEventListener("click", function (event) {
    var target = event.target;
    if (target && target.closest && target.closest("[data-shortcuts-toggle]")) {
      event.preventDefault();
      toggleShortcuts();
    }
  });

  // --- polling paused on a hidden tab --------------------------------------------------------------------------------
  // The queue list polls with hx-trigger="every 10s, refresh". While the tab is hidden the poll is cancelled here
  // (htmx:confirm), and when it shows again one refresh is triggered at once.
  document.addEventListener("htmx:confirm", function (event) {
    var element = event.detail && event.detail.elt;
    if (document.hidden && element && element.hasAttribute && element.hasAttribute("data-poll")) {
      event.preventDefault();
    }
  });

  document.addEventListener("visibilitychange", function () {
    if (document.hidden || !window.htmx) return;
    document.querySelectorAll("[data-poll]").forEach(function (element) {
      window.htmx.trigger(element, "refresh");
    });
  });

  // After the list is swapped, keep the selected row selected (when it is still there).
  document.addEventListener("htmx:afterSwap", function () {
    if (selectedId === null) return;
    var index = selectedIndex();
    if (index >= 0) select(index);
  });

  // --- renewing the review lease while the reviewer works (issue 11 item 7) --------------------------------------
  // A renewal goes out only when the reviewer pressed a key, clicked, scrolled or moved the pointer since the last
  // one, and never from a hidden tab: an idle or background review page lets its lease run out as configured, and
  // the item returns to the queue. The server refuses a renewal that does not say "active=1" (review-lease-idle).
  function startLeaseRenewal() {
    var holder = document.querySelector("[data-lease-renew-url]");
    if (!holder) return;
    var url = holder.getAttribute("data-lease-renew-url");
    var every = Number(holder.getAttribute("data-lease-renew-seconds")) || 60;
    var status = document.querySelector("[data-lease-status]");
    var timer = null;
    var active = false;

    function noteActivity() {
      if (!document.hidden) active = true;
    }
    ["keydown", "pointerdown", "pointermove", "wheel", "scroll", "touchstart", "input"].forEach(function (name) {
      document.addEventListener(name, noteActivity, { passive: true, capture: true });
    });

    function renew() {
      if (document.hidden || !active) return;
      active = false;
      var body = new URLSearchParams();
      body.set("active", "1");
      fetch(url, {
        method: "POST",
        credentials: "same-origin",
        headers: { "X-CSRFToken": csrfToken(), Accept: "application/json" },
        body: body,
      })
        .then(function (response) {
          return response.json().then(function (result) {
            return { ok: response.ok, body: result };
          });
        })
        .then(function (result) {
          if (!status) return;
          if (result.ok) {
            status.textContent = "Yours until " + result.body.expires_at_display + ".";
            status.classList.remove("error");
          } else {
            status.textContent = result.body.message || "You no longer hold this item.";
            status.classList.add("error");
            window.clearInterval(timer);
          }
        })
        .catch(function () {
          active = true; /* a network blip: the next tick tries again with the activity it lost */
        });
    }

    timer = window.setInterval(renew, every * 1000);
  }

  function ready() {
    root.setAttribute("data-portal-js", "ready");
    startLeaseRenewal();
    var rationale = document.querySelector("[data-max-chars]");
    if (rationale) updateCounter(rationale);
    var first = rows();
    if (first.length && document.querySelector("[data-queue-autoselect]")) select(0);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", ready);
  else ready();
})();
